variable "project_id" {
  type        = string
  description = "Project of this environment: its deploy account lives here and gets its roles here only."
}

variable "github_repository" {
  type        = string
  description = "The GitHub repository (owner/name) whose workflows may authenticate."

  validation {
    condition     = can(regex("^[A-Za-z0-9][-A-Za-z0-9]*/[A-Za-z0-9._-]+$", var.github_repository))
    error_message = "github_repository must be owner/name, e.g. acme/tpuray."
  }
}

variable "home" {
  type        = bool
  description = "Whether this environment hosts the Workload Identity pool, its GitHub provider and the tpuray-preview account (exactly one environment does)."
}

variable "ci_project_id" {
  type        = string
  description = "Project that hosts the pool and tpuray-preview (the home environment's project)."
}

variable "environment" {
  type        = string
  description = "This environment's GitHub environment: the only one whose jobs may impersonate this environment's tpuray-deploy."

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]+$", var.environment))
    error_message = "environment must be a GitHub environment name, e.g. dev."
  }
}

variable "deploy_environments" {
  type        = list(string)
  description = "Every deploy environment (the provider's attribute condition, in the CI home): GitHub environments restricted to the main branch (docs/ci.md)."
  default     = ["dev", "staging", "prod"]
}

variable "deploy_ref" {
  type        = string
  description = "The only Git ref whose environment jobs the provider accepts: deploys run from the main branch."
  default     = "refs/heads/main"

  validation {
    condition     = startswith(var.deploy_ref, "refs/heads/")
    error_message = "deploy_ref must be a branch ref, e.g. refs/heads/main."
  }
}

variable "pool_id" {
  type        = string
  description = "ID of the Workload Identity pool."
  default     = "github"
}

variable "provider_id" {
  type        = string
  description = "ID of the pool's OIDC provider for GitHub Actions."
  default     = "tpuray"
}

# The deploy account's roles, by where they are granted, all in this environment's project:
# deploy_roles on the project, serviceAccountUser on the node account and serviceAccountAdmin
# on each workload GSA, deploy_bucket_role on each workload bucket, deploy_bundle_roles on the
# bundle bucket, deploy_billing_role on the budget's billing account (and, in other modules,
# artifactregistry.writer on the docker repository, objectUser on this environment's Pulumi
# state bucket, Encrypter/Decrypter on its Pulumi secrets key, projectIamAdmin under the
# condition below). Every permission the resources of the committed stacks need for create and
# update (tpuray/data/deploy_permissions.yaml) must be in these roles as Google defines them
# (tpuray/data/iam_roles.json): tests/test_deploy_permissions.py fails otherwise.
variable "deploy_roles" {
  type        = list(string)
  description = "Project roles `pulumi up` needs (docs/foundation.md, CI identity). Basic roles and project-wide service account roles are refused: the deploy account's grants on accounts are on those accounts (node_service_account, workload_service_accounts)."
  default = [
    "roles/container.admin",              # GKE cluster, node pools, every Kubernetes object
    "roles/compute.admin",                # Cloud Router and NAT, TPU7x workload policies
    "roles/monitoring.alertPolicyEditor", # the stack's alert policies
    "roles/monitoring.dashboardEditor",   # the stack's dashboard
  ]

  validation {
    condition     = alltrue([for r in var.deploy_roles : !contains(["roles/owner", "roles/editor", "roles/iam.serviceAccountAdmin", "roles/iam.serviceAccountUser", "roles/iam.serviceAccountTokenCreator"], r)])
    error_message = "deploy_roles must not contain roles/owner, roles/editor or a project-wide service account role (grant those on the account: node_service_account, workload_service_accounts)."
  }
}

variable "node_service_account" {
  type        = string
  description = "Account ID of the GKE nodes' service account (tpuray.gcp_rules.service_account_id: <cluster>-nodes). Created here; the deploy account may act as it (roles/iam.serviceAccountUser on this account only), as the cluster and its node pools run as it."

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.node_service_account))
    error_message = "node_service_account must be a service account ID: 6-30 lowercase letters, digits or hyphens."
  }
}

variable "workload_service_accounts" {
  type        = list(string)
  description = "Account IDs of the Ray pods' Google service accounts (<cluster>-ray, <cluster>-serve). Created here; the deploy account holds roles/iam.serviceAccountAdmin on each (the stack binds its Kubernetes service accounts there: setIamPolicy), on no other account."
  default     = []

  validation {
    condition     = alltrue([for a in var.workload_service_accounts : can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", a))])
    error_message = "workload_service_accounts must be service account IDs: 6-30 lowercase letters, digits or hyphens."
  }
}

variable "deploy_bucket_role" {
  type        = string
  description = "Role on each workload bucket (var.buckets): the stack binds the workloads' account there (storage.buckets.getIamPolicy and setIamPolicy). Legacy Bucket Owner is the narrowest predefined role with setIamPolicy (46 permissions against Storage Admin's 104); it cannot delete the bucket or read objects."
  default     = "roles/storage.legacyBucketOwner"
}

variable "deploy_bundle_roles" {
  type        = list(string)
  description = "Roles on the bundle bucket (var.bundle_bucket): create objects, and read them back (the deploy workflow checks the sha256 of what the bundle's name holds). No role with storage.objects.delete, which overwriting an object needs: a name, once written, keeps its bytes."
  default     = ["roles/storage.objectCreator", "roles/storage.objectViewer"]

  validation {
    condition     = alltrue([for r in var.deploy_bundle_roles : contains(["roles/storage.objectCreator", "roles/storage.objectViewer"], r)])
    error_message = "deploy_bundle_roles: only roles/storage.objectCreator and roles/storage.objectViewer (no delete, so no overwrite)."
  }
}

variable "deploy_billing_role" {
  type        = string
  description = "Role on the Cloud Billing account of the stack's budget (var.billing_account): a budget is created on the billing account, not in the project. Costs Manager is the narrowest predefined role with billing.budgets.create."
  default     = "roles/billing.costsManager"
}

variable "buckets" {
  type        = list(string)
  description = "The environment's workload buckets (modules/buckets), where the deploy account gets deploy_bucket_role."
  default     = []
}

variable "bundle_bucket" {
  type        = string
  description = "The bucket the deploy workflow uploads app bundles to (tpuray:workloads.bundleUri); null: none."
  default     = null
}

variable "billing_account" {
  type        = string
  description = "The Cloud Billing account of the stack's budget; null: the stack declares none."
  default     = null
}

variable "binary_authorization" {
  type        = bool
  description = "Whether the stack enforces Binary Authorization (tpuray:cluster.binaryAuthorization.enforce): the deploy account then edits the project's policy (roles/binaryauthorization.policyEditor)."
  default     = false
}

variable "grantable_roles" {
  type        = list(string)
  description = "The only roles the deploy account may grant in the project: the node service account's roles (infra/components/cluster.py NODE_ROLES)."
  default = [
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/autoscaling.metricsWriter",
    "roles/artifactregistry.reader",
  ]
}

variable "preview_roles" {
  type        = list(string)
  description = "Read-only project roles for `pulumi preview` and `terraform plan` on pull requests."
  default = [
    "roles/browser",
    "roles/compute.viewer",
    "roles/container.viewer",
    "roles/iam.securityReviewer",
    "roles/iam.serviceAccountViewer",
    "roles/iam.workloadIdentityPoolViewer",
    "roles/cloudkms.viewer",
    "roles/artifactregistry.reader",
    "roles/serviceusage.serviceUsageViewer",
  ]

  validation {
    condition     = alltrue([for r in var.preview_roles : !contains(["roles/owner", "roles/editor", "roles/viewer"], r)])
    error_message = "preview_roles must not contain basic roles (roles/owner, roles/editor, roles/viewer)."
  }
}
