# Everything one environment's Pulumi stack expects to exist, from an empty project.
# The root outputs (terraform/foundation/<env>/outputs.tf) are exactly the fields of
# tpuray.config.TerraformOutputs; tests/test_foundation.py holds both sides to it.
locals {
  apis = [
    "artifactregistry.googleapis.com",
    "billingbudgets.googleapis.com",      # the stack's Cloud Billing budget (tpuray:observability.budget)
    "binaryauthorization.googleapis.com", # the project's policy, where a stack enforces it (prod)
    "cloudkms.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "container.googleapis.com",
    "iam.googleapis.com",
    "iamcredentials.googleapis.com",
    "monitoring.googleapis.com",    # the stack's dashboard and alert policies
    "secretmanager.googleapis.com", # the GKE Secret Manager add-on (an llm stack's Hugging Face token)
    "serviceusage.googleapis.com",
    "storage.googleapis.com",
    "sts.googleapis.com",
  ]
}

resource "google_project_service" "apis" {
  for_each           = toset(local.apis)
  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

module "network" {
  source        = "../network"
  project_id    = var.project_id
  region        = var.region
  name          = var.network.name
  subnet_cidr   = var.network.subnet_cidr
  pods_cidr     = var.network.pods_cidr
  services_cidr = var.network.services_cidr
  # The stack's gke-l7-rilb Gateway (tpuray:workloads.serve.gateway.proxyOnlySubnetCidr).
  proxy_only_cidr = var.network.proxy_only_cidr
  depends_on      = [google_project_service.apis]
}

module "kms" {
  source     = "../kms"
  project_id = var.project_id
  region     = var.region
  key_ring   = var.kms.key_ring
  # The stack's secrets provider: only this environment's deploy account decrypts.
  pulumi_secrets_users = {
    deploy = module.ci_identity.deploy_member
  }
  depends_on = [google_project_service.apis]
}

module "buckets" {
  source        = "../buckets"
  project_id    = var.project_id
  location      = var.region
  buckets       = keys(var.buckets)
  bundle_bucket = var.bundle_bucket
  depends_on    = [google_project_service.apis]
}

module "ci_identity" {
  source            = "../ci-identity"
  project_id        = var.project_id
  github_repository = var.github_repository
  home              = var.ci.home
  ci_project_id     = var.ci.project_id
  environment       = var.environment
  # The accounts the stack's cluster and Ray pods run as: created here, so that the deploy
  # account's grants are on them and not on every account of the project.
  node_service_account      = var.service_accounts.nodes
  workload_service_accounts = var.service_accounts.workloads
  # Where the deploy account gets roles beyond the project's (ci-identity variables.tf);
  # the bucket grants wait for the buckets.
  buckets              = keys(var.buckets)
  bundle_bucket        = var.bundle_bucket
  billing_account      = var.billing_account
  binary_authorization = var.binary_authorization
  depends_on           = [google_project_service.apis, module.buckets]
}

module "registry" {
  source         = "../registry"
  project_id     = var.project_id
  region         = var.region
  repository_id  = var.registry.repository_id
  remote_proxies = var.registry.remote_proxies
  kms_key_name   = module.kms.artifacts_kms_key
  writers        = { deploy = module.ci_identity.deploy_member }
  depends_on     = [google_project_service.apis]
}

# The foundations' Terraform state, in the CI home (terraform/foundation/<env>/versions.tf).
# CI only reads it (terraform plan -lock=false on pull requests); terraform apply is the
# platform team's, with its own credentials.
module "state" {
  count      = var.ci.home ? 1 : 0
  source     = "../state"
  project_id = var.project_id
  location   = var.region
  bucket     = var.ci.bucket
  object_viewers = {
    preview = module.ci_identity.preview_member
  }
  bucket_readers = {
    preview = module.ci_identity.preview_member
  }
  depends_on = [google_project_service.apis]
}

# This environment's Pulumi state (pulumi login gs://BUCKET), in its own project: only its own
# deploy account reads and writes it. Pull requests run no Pulumi command against it (a
# preview would have to decrypt the stack's data key: docs/ci.md, What a pull request can do).
module "pulumi_state" {
  source     = "../state"
  project_id = var.project_id
  location   = var.region
  bucket     = var.pulumi_state_bucket
  object_users = {
    deploy = module.ci_identity.deploy_member
  }
  depends_on = [google_project_service.apis]
}

module "reservations" {
  source                = "../reservations"
  project_id            = var.project_id
  tpu_reservations      = var.tpu_reservations
  existing_reservations = var.existing_reservations
  depends_on            = [google_project_service.apis]
}
