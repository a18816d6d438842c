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

  # prod hosts the Workload Identity pool, the CI service accounts and the state bucket.
  ci = {
    home       = false
    project_id = "acme-ml-prod"
    bucket     = "acme-ml-prod-tpuray-state"
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

  # Every bucket a gs:// URI of stacks/Pulumi.staging.yaml names.
  buckets = {
    "acme-ml-staging-ray"    = { bundles = true } # bundles (tpuray:workloads.bundleUri) and checkpoints (train.storageUri)
    "acme-ml-staging-data"   = {}                 # training data (train.dataUri)
    "acme-ml-staging-models" = {}                 # model weights mirrored from Hugging Face (serve.modelSource)
  }
}
