# The staging foundation: what stacks/Pulumi.staging.yaml expects to exist (docs/foundation.md).
provider "google" {
  project = "acme-ml-staging"
  region  = "us-east5"
  default_labels = {
    managed-by  = "terraform"
    component   = "tpuray-foundation"
    environment = "staging"
  }
}

module "foundation" {
  source            = "../../modules/foundation"
  project_id        = "acme-ml-staging"
  region            = "us-east5"
  environment       = "staging"
  github_repository = "acme/tpuray"

  # prod hosts the Workload Identity pool, the preview account and the Terraform state bucket;
  # this environment's deploy account and Pulumi state live in its own project.
  ci = {
    home       = false
    project_id = "acme-ml-prod"
    bucket     = "acme-ml-prod-tpuray-state"
  }

  # `pulumi login gs://acme-ml-staging-pulumi-state` (this environment's PULUMI_BACKEND_URL).
  pulumi_state_bucket = "acme-ml-staging-pulumi-state"

  # The accounts stacks/Pulumi.staging.yaml's cluster tpuray-staging runs as: its nodes, its training and
  # interactive pods, its serving pods (tpuray.gcp_rules.service_account_id).
  service_accounts = {
    nodes     = "tpuray-staging-nodes"
    workloads = ["tpuray-staging-ray", "tpuray-staging-serve"]
  }

  network = {
    name          = "tpuray-staging"
    subnet_cidr   = "10.12.0.0/20"
    pods_cidr     = "10.40.0.0/14"
    services_cidr = "10.44.0.0/20"
  }

  # The key ring stacks/Pulumi.staging.yaml names in tpuray:cluster.secretsKmsKey.
  kms = {
    key_ring = "tpuray-staging"
  }

  # tpuray:workloads.bundleUri: written by the deploy account only (new objects), read by the
  # workloads' accounts, each object held for 30 days (modules/buckets).
  bundle_bucket = "acme-ml-staging-bundles"

  # Every bucket a gs:// URI of stacks/Pulumi.staging.yaml names, but the bundles'.
  buckets = {
    "acme-ml-staging-ray"    = {} # checkpoints (train.storageUri)
    "acme-ml-staging-data"   = {} # training data (train.dataUri)
    "acme-ml-staging-models" = {} # model weights mirrored from Hugging Face (serve.modelSource)
  }
}
