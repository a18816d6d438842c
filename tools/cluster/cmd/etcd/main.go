// A single-member etcd on loopback, embedded with go.etcd.io/etcd/server/v3/embed.
// Usage: etcd DATA_DIR CLIENT_URL PEER_URL
package main

import (
	"log"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if len(os.Args) != 4 {
		log.Fatalf("usage: %s DATA_DIR CLIENT_URL PEER_URL", os.Args[0])
	}
	cfg := embed.NewConfig()
	cfg.Dir = os.Args[1]
	client, err := url.Parse(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	peer, err := url.Parse(os.Args[3])
	if err != nil {
		log.Fatal(err)
	}
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		log.Printf("etcd ready on %s", client.String())
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		log.Fatal("etcd took too long to start")
	}
	log.Fatal(<-e.Err())
}
