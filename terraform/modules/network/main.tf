# The VPC the GKE cluster runs in: one regional subnetwork with the two secondary ranges
# a VPC-native cluster needs, Private Google Access (Google APIs, Artifact Registry and
# GCS without public IPs) and Cloud NAT, because private nodes have no external address
# and otherwise no route to the internet.
resource "google_compute_network" "vpc" {
  project                 = var.project_id
  name                    = var.name
  auto_create_subnetworks = false
  routing_mode            = "REGIONAL"
}

resource "google_compute_subnetwork" "gke" {
  # checkov:skip=CKV_GCP_76: an IPv4-only subnetwork (the default stack type): Private Google Access is on for its IPv4 ranges and there are no IPv6 addresses
  project                  = var.project_id
  name                     = "${var.name}-${var.region}-gke"
  region                   = var.region
  network                  = google_compute_network.vpc.id
  ip_cidr_range            = var.subnet_cidr
  private_ip_google_access = true

  secondary_ip_range {
    range_name    = var.pods_range_name
    ip_cidr_range = var.pods_cidr
  }

  secondary_ip_range {
    range_name    = var.services_range_name
    ip_cidr_range = var.services_cidr
  }

  log_config {
    aggregation_interval = "INTERVAL_5_SEC"
    flow_sampling        = var.flow_log_sampling
    metadata             = "INCLUDE_ALL_METADATA"
  }
}

# Ingress nothing but what GKE itself opens (its own rules, priority 1000): an explicit,
# logged deny-all in place of the implied one.
resource "google_compute_firewall" "deny_ingress" {
  project       = var.project_id
  name          = "${var.name}-deny-all-ingress"
  network       = google_compute_network.vpc.id
  direction     = "INGRESS"
  priority      = 65534
  source_ranges = ["0.0.0.0/0"]

  deny {
    protocol = "all"
  }

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

resource "google_compute_router" "egress" {
  project = var.project_id
  name    = "${var.name}-${var.region}-egress"
  region  = var.region
  network = google_compute_network.vpc.id
}

resource "google_compute_router_nat" "egress" {
  project                            = var.project_id
  name                               = "${var.name}-${var.region}-nat"
  region                             = var.region
  router                             = google_compute_router.egress.name
  nat_ip_allocate_option             = "AUTO_ONLY"
  source_subnetwork_ip_ranges_to_nat = "LIST_OF_SUBNETWORKS"

  subnetwork {
    name                    = google_compute_subnetwork.gke.id
    source_ip_ranges_to_nat = ["ALL_IP_RANGES"]
  }

  log_config {
    enable = true
    filter = "ERRORS_ONLY"
  }
}

# The proxy-only subnet the Envoy proxies of a regional internal Application Load Balancer
# take their addresses from: GKE's gke-l7-rilb Gateway class needs one, in the cluster's
# region and VPC, before the Gateway can program its load balancer. One per region and VPC
# may be ACTIVE. https://cloud.google.com/load-balancing/docs/proxy-only-subnets ,
# https://cloud.google.com/kubernetes-engine/docs/how-to/deploying-gateways#configure_a_proxy-only_subnet
resource "google_compute_subnetwork" "proxy_only" {
  # checkov:skip=CKV_GCP_26: a REGIONAL_MANAGED_PROXY subnet takes no flow logs (enableFlowLogs is not supported for that purpose)
  # checkov:skip=CKV_GCP_74: Private Google Access is for VMs in a subnet; a proxy-only subnet holds only the load balancer's Envoy proxies
  # checkov:skip=CKV_GCP_76: same: no VMs, no IPv6 ranges in a proxy-only subnet
  count         = var.proxy_only_cidr == null ? 0 : 1
  project       = var.project_id
  name          = "${var.name}-${var.region}-proxy-only"
  region        = var.region
  network       = google_compute_network.vpc.id
  ip_cidr_range = var.proxy_only_cidr
  purpose       = "REGIONAL_MANAGED_PROXY"
  role          = "ACTIVE"
}
