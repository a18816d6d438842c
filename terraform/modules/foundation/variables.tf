variable "project_id" {
  type        = string
  description = "GCP project of this environment (the stack's tpuray:gcp.project)."

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a GCP project ID: 6-30 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "region" {
  type        = string
  description = "Region of the cluster (the stack's tpuray:gcp.region): subnetwork, NAT, key ring and repositories live here."

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a GCP region, e.g. us-east5."
  }
}

variable "environment" {
  type        = string
  description = "dev, staging or prod: the stack this foundation serves."

  validation {
    condition     = contains(["dev", "staging", "prod"], var.environment)
    error_message = "environment must be one of dev, staging, prod."
  }
}

variable "github_repository" {
  type        = string
  description = "owner/name of the GitHub repository whose workflows deploy the stacks."
}

variable "ci" {
  type = object({
    home       = bool
    project_id = string
    bucket     = string
  })
  description = <<-EOT
    Where the shared CI pieces live. Exactly one environment is the home (home = true): it
    declares the Workload Identity pool, its GitHub provider, the tpuray-preview service account
    and `bucket`, the bucket of every foundation's Terraform state. Every environment names the
    home's project and bucket; its own deploy account and Pulumi state bucket live in its own
    project (pulumi_state_bucket).
  EOT

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.ci.project_id))
    error_message = "ci.project_id must be a GCP project ID."
  }
}

variable "pulumi_state_bucket" {
  type        = string
  description = "The bucket of this environment's Pulumi state (the PULUMI_BACKEND_URL of its GitHub environment), in this project: only this environment's deploy account writes it."
}

variable "service_accounts" {
  type = object({
    nodes     = string
    workloads = list(string)
  })
  description = <<-EOT
    Account IDs of the service accounts the stack's resources run as (tpuray.gcp_rules.service_account_id
    of the stack's cluster name): `nodes`, the GKE nodes' (<cluster>-nodes); `workloads`, the Ray
    pods' Google service accounts (<cluster>-ray, and <cluster>-serve for a stack that serves).
    The foundation creates them and grants the deploy account what it needs on each account.
  EOT
}

variable "network" {
  type = object({
    name            = string
    subnet_cidr     = string
    pods_cidr       = string
    services_cidr   = string
    proxy_only_cidr = optional(string)
  })
  description = "The VPC: its name, the nodes' primary range, the Pods and Services secondary ranges and, for a stack with a gke-l7-rilb Gateway, the region's proxy-only subnet. Must not overlap the stack's cluster.masterIpv4CidrBlock (default 172.16.0.0/28)."
}

variable "kms" {
  type = object({
    key_ring = optional(string, "tpuray")
  })
  description = "The key ring holding the GKE secrets key (the stack's tpuray:cluster.secretsKmsKey names it) and the Artifact Registry key."
  default     = {}
}

variable "buckets" {
  type        = map(object({}))
  description = <<-EOT
    The workload buckets the stack's gs:// URIs name (tpuray:workloads.train.dataUri and
    storageUri, serve.checkpointUri and modelSource), by name. The app bundles have their own
    bucket (bundle_bucket).
  EOT
  default     = {}
}

variable "bundle_bucket" {
  type        = string
  description = "The bucket of tpuray:workloads.bundleUri: the deploy workflow uploads the app bundles there; only the deploy account writes it (new objects only), the workloads' accounts read it, and a retention policy holds every object (modules/buckets)."
  default     = null
}

variable "binary_authorization" {
  type        = bool
  description = "The stack enforces Binary Authorization (tpuray:cluster.binaryAuthorization.enforce): its deploy account may write the project's policy."
  default     = false
}

variable "billing_account" {
  type        = string
  description = "Cloud Billing account of the stack's budget (tpuray:observability.budget.billingAccount): the deploy account may manage budgets on it. null when the stack declares no budget."
  default     = null

  validation {
    condition     = var.billing_account == null || can(regex("^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$", var.billing_account))
    error_message = "billing_account must be a Cloud Billing account ID, e.g. 01A2B3-C4D5E6-F7A8B9."
  }
}

variable "registry" {
  type = object({
    repository_id  = optional(string, "tpuray")
    remote_proxies = optional(bool, true)
  })
  description = "The docker repository's ID and whether to add the Docker Hub and PyPI read-through repositories."
  default     = {}
}

variable "tpu_reservations" {
  type = map(object({
    zone         = string
    machine_type = string
    vm_count     = number
  }))
  description = "Specific TPU reservations to declare (see modules/reservations); usually empty: committed TPU capacity arrives as a reservation your account team creates."
  default     = {}
}

variable "existing_reservations" {
  type        = map(string)
  description = "Reservations that exist already: name used by the stack's capacity tier -> real reservation name."
  default     = {}
}
