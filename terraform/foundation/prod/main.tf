# The prod foundation: what stacks/Pulumi.prod.yaml expects to exist (docs/foundation.md).
provider "google" {
  project = "acme-ml-prod"
  region  = "us-east5"
  default_labels = {
    managed-by  = "terraform"
    component   = "tpuray-foundation"
    environment = "prod"
  }
}

module "foundation" {
  source            = "../../modules/foundation"
  project_id        = "acme-ml-prod"
  region            = "us-east5"
  environment       = "prod"
  github_repository = "acme/tpuray"

  # prod hosts the Workload Identity pool, the preview account and the Terraform state bucket;
  # this environment's deploy account and Pulumi state live in its own project.
  ci = {
    home       = true
    project_id = "acme-ml-prod"
    bucket     = "acme-ml-prod-tpuray-state"
  }

  # `pulumi login gs://acme-ml-prod-pulumi-state` (this environment's PULUMI_BACKEND_URL).
  pulumi_state_bucket = "acme-ml-prod-pulumi-state"

  # The accounts stacks/Pulumi.prod.yaml's cluster tpuray-prod runs as: its nodes, its training and
  # interactive pods, its serving pods (tpuray.gcp_rules.service_account_id).
  service_accounts = {
    nodes     = "tpuray-prod-nodes"
    workloads = ["tpuray-prod-ray", "tpuray-prod-serve"]
  }

  network = {
    name          = "tpuray-prod"
    subnet_cidr   = "10.20.0.0/20"
    pods_cidr     = "10.64.0.0/14"
    services_cidr = "10.68.0.0/20"
    # us-east5's proxy-only subnet for the serve Gateway (gke-l7-rilb):
    # tpuray:workloads.serve.gateway.proxyOnlySubnetCidr.
    proxy_only_cidr = "10.129.0.0/23"
  }

  # The key ring stacks/Pulumi.prod.yaml names in tpuray:cluster.secretsKmsKey.
  kms = {
    key_ring = "tpuray-prod"
  }

  # tpuray:workloads.bundleUri: written by the deploy account only (new objects), read by the
  # workloads' accounts, each object held for 30 days (modules/buckets).
  bundle_bucket = "acme-ml-prod-bundles"

  # Every bucket a gs:// URI of stacks/Pulumi.prod.yaml names, but the bundles'.
  buckets = {
    "acme-ml-prod-ray"    = {} # checkpoints (train.storageUri)
    "acme-ml-prod-data"   = {} # training data (train.dataUri)
    "acme-ml-prod-models" = {} # model weights mirrored from Hugging Face (serve.modelSource)
  }

  # The billing account of the stack's budget (tpuray:observability.budget.billingAccount):
  # the deploy account manages budgets there. Applying this grant takes Billing Account
  # Administrator on that account.
  billing_account = "01A2B3-C4D5E6-F7A8B9"

  # stacks/Pulumi.prod.yaml enforces Binary Authorization and declares the project's policy.
  binary_authorization = true

  # prod's training pool consumes this reservation first (stacks/Pulumi.prod.yaml):
  # v6e 4x4 = 4 VMs of ct6e-standard-4t per slice, 2 slices. If your account team created
  # the reservation from a commitment, move it to existing_reservations instead.
  tpu_reservations = {
    "acme-v6e-4x4-prod" = {
      zone         = "us-east5-b"
      machine_type = "ct6e-standard-4t"
      vm_count     = 8
    }
  }
}
