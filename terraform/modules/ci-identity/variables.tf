variable "project_id" {
  type        = string
  description = "Project of this environment: the CI service accounts get their roles here."
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
  description = "Whether this environment hosts the Workload Identity pool and the two CI service accounts (exactly one environment does)."
}

variable "ci_project_id" {
  type        = string
  description = "Project that hosts the pool and the CI service accounts (the home environment's project)."
}

variable "deploy_environments" {
  type        = list(string)
  description = "GitHub environments (protected by required reviewers) whose jobs may impersonate the deploy account."
  default     = ["dev", "staging", "prod"]
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

# The deploy account's roles, by where they are granted: deploy_roles on the project,
# deploy_bucket_role on each workload bucket, deploy_bundle_role on the bundle bucket,
# deploy_billing_role on the budget's billing account (and, in other modules,
# artifactregistry.writer on the docker repository, storage.objectAdmin on the state bucket,
# projectIamAdmin under the condition below). Every permission the resources of the
# committed stacks need for create and update (tpuray/data/deploy_permissions.yaml) must be
# in these roles as Google defines them (tpuray/data/iam_roles.json):
# tests/test_deploy_permissions.py fails otherwise.
variable "deploy_roles" {
  type        = list(string)
  description = "Project roles `pulumi up` needs (docs/foundation.md, CI identity). Basic roles are refused."
  default = [
    "roles/container.admin",              # GKE cluster, node pools, every Kubernetes object
    "roles/compute.admin",                # Cloud Router and NAT, TPU7x workload policies
    "roles/iam.serviceAccountAdmin",      # the node and workload service accounts, their IAM
    "roles/iam.serviceAccountUser",       # actAs the node service account (cluster, node pools)
    "roles/monitoring.alertPolicyEditor", # the stack's alert policies
    "roles/monitoring.dashboardEditor",   # the stack's dashboard
  ]

  validation {
    condition     = alltrue([for r in var.deploy_roles : !contains(["roles/owner", "roles/editor"], r)])
    error_message = "deploy_roles must not contain roles/owner or roles/editor."
  }
}

variable "deploy_bucket_role" {
  type        = string
  description = "Role on each workload bucket (var.buckets): the stack binds the workloads' account there (storage.buckets.getIamPolicy and setIamPolicy). Legacy Bucket Owner is the narrowest predefined role with setIamPolicy (46 permissions against Storage Admin's 104); it cannot delete the bucket or read objects."
  default     = "roles/storage.legacyBucketOwner"
}

variable "deploy_bundle_role" {
  type        = string
  description = "Role on the bucket the app bundles go to (var.bundle_bucket), beside deploy_bucket_role (which creates objects): `gcloud storage cp --no-clobber` first reads the object (storage.objects.get)."
  default     = "roles/storage.objectViewer"
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
  description = "The workload bucket the deploy workflow uploads app bundles to (tpuray:workloads.bundleUri); null: none."
  default     = null
}

variable "billing_account" {
  type        = string
  description = "The Cloud Billing account of the stack's budget; null: the stack declares none."
  default     = null
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
