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

  # prod hosts the Workload Identity pool, the CI service accounts and the state bucket.
  ci = {
    home       = true
    project_id = "acme-ml-prod"
    bucket     = "acme-ml-prod-tpuray-state"
  }

  network = {
    name          = "tpuray-prod"
    subnet_cidr   = "10.20.0.0/20"
    pods_cidr     = "10.64.0.0/14"
    services_cidr = "10.68.0.0/20"
  }

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
