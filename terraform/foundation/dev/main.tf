# The dev foundation: what stacks/Pulumi.dev.yaml expects to exist (docs/foundation.md).
provider "google" {
  project = "acme-ml-dev"
  region  = "us-east5"
  default_labels = {
    managed-by  = "terraform"
    component   = "tpuray-foundation"
    environment = "dev"
  }
}

module "foundation" {
  source            = "../../modules/foundation"
  project_id        = "acme-ml-dev"
  region            = "us-east5"
  environment       = "dev"
  github_repository = "acme/tpuray"

  # prod hosts the Workload Identity pool, the preview account and the Terraform state bucket;
  # this environment's deploy account and Pulumi state live in its own project.
  ci = {
    home       = false
    project_id = "acme-ml-prod"
    bucket     = "acme-ml-prod-tpuray-state"
  }

  # `pulumi login gs://acme-ml-dev-pulumi-state` (this environment's PULUMI_BACKEND_URL).
  pulumi_state_bucket = "acme-ml-dev-pulumi-state"

  # The accounts stacks/Pulumi.dev.yaml's cluster tpuray-dev runs as: its nodes, its training and
  # interactive pods, its serving pods (tpuray.gcp_rules.service_account_id).
  service_accounts = {
    nodes     = "tpuray-dev-nodes"
    workloads = ["tpuray-dev-ray", "tpuray-dev-serve"]
  }

  network = {
    name          = "tpuray-dev"
    subnet_cidr   = "10.10.0.0/20"
    pods_cidr     = "10.32.0.0/14"
    services_cidr = "10.36.0.0/20"
  }

  # The key ring stacks/Pulumi.dev.yaml names in tpuray:cluster.secretsKmsKey.
  kms = {
    key_ring = "tpuray-dev"
  }

  # tpuray:workloads.bundleUri: written by the deploy account only (new objects), read by the
  # workloads' accounts, each object held for 30 days (modules/buckets).
  bundle_bucket = "acme-ml-dev-bundles"

  # Every bucket a gs:// URI of stacks/Pulumi.dev.yaml names, but the bundles'.
  buckets = {
    "acme-ml-dev-ray"  = {} # checkpoints (train.storageUri)
    "acme-ml-dev-data" = {} # training data (train.dataUri)
  }
}
