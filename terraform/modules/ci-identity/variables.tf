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

variable "deploy_roles" {
  type        = list(string)
  description = "Project roles `pulumi up` needs (README: the real path). Basic roles are refused."
  default = [
    "roles/container.admin",
    "roles/compute.admin",
    "roles/iam.serviceAccountAdmin",
    "roles/iam.serviceAccountUser",
  ]

  validation {
    condition     = alltrue([for r in var.deploy_roles : !contains(["roles/owner", "roles/editor"], r)])
    error_message = "deploy_roles must not contain roles/owner or roles/editor."
  }
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
