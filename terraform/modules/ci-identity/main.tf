# GitHub Actions authenticate with Workload Identity Federation: no JSON keys.
# One pool and two service accounts, in the home environment's project:
# - tpuray-preview: read-only, impersonable by pull_request jobs of this repository;
# - tpuray-deploy: impersonable only by jobs running in one of the protected GitHub
#   environments (the OIDC subject repo:OWNER/REPO:environment:NAME).
# Every environment grants the two accounts their roles in its own project.
locals {
  deploy_email  = var.home ? google_service_account.deploy[0].email : "tpuray-deploy@${var.ci_project_id}.iam.gserviceaccount.com"
  preview_email = var.home ? google_service_account.preview[0].email : "tpuray-preview@${var.ci_project_id}.iam.gserviceaccount.com"
  environments  = join(", ", [for e in var.deploy_environments : "'${e}'"])
}

resource "google_iam_workload_identity_pool" "github" {
  count                     = var.home ? 1 : 0
  project                   = var.project_id
  workload_identity_pool_id = var.pool_id
  display_name              = "GitHub Actions"
  description               = "Workflows of ${var.github_repository}"
}

resource "google_iam_workload_identity_pool_provider" "github" {
  count                              = var.home ? 1 : 0
  project                            = var.project_id
  workload_identity_pool_id          = google_iam_workload_identity_pool.github[0].workload_identity_pool_id
  workload_identity_pool_provider_id = var.provider_id
  display_name                       = "GitHub OIDC"
  attribute_mapping = {
    "google.subject"        = "assertion.sub"
    "attribute.repository"  = "assertion.repository"
    "attribute.environment" = "assertion.environment"
    "attribute.event_name"  = "assertion.event_name"
  }
  # Only this repository, and only pull requests or jobs in its deploy environments.
  attribute_condition = "assertion.repository == '${var.github_repository}' && (assertion.event_name == 'pull_request' || assertion.environment in [${local.environments}])"

  oidc {
    issuer_uri = "https://token.actions.githubusercontent.com"
  }
}

resource "google_service_account" "deploy" {
  count        = var.home ? 1 : 0
  project      = var.project_id
  account_id   = "tpuray-deploy"
  display_name = "tpuray deploy (pulumi up from protected GitHub environments)"
}

resource "google_service_account" "preview" {
  count        = var.home ? 1 : 0
  project      = var.project_id
  account_id   = "tpuray-preview"
  display_name = "tpuray preview (read-only, pull requests)"
}

resource "google_service_account_iam_member" "deploy_from_environments" {
  for_each           = var.home ? toset(var.deploy_environments) : toset([])
  service_account_id = google_service_account.deploy[0].name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principal://iam.googleapis.com/${google_iam_workload_identity_pool.github[0].name}/subject/repo:${var.github_repository}:environment:${each.value}"
}

resource "google_service_account_iam_member" "preview_from_pull_requests" {
  count              = var.home ? 1 : 0
  service_account_id = google_service_account.preview[0].name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principal://iam.googleapis.com/${google_iam_workload_identity_pool.github[0].name}/subject/repo:${var.github_repository}:pull_request"
}

resource "google_project_iam_member" "deploy" {
  # checkov:skip=CKV_GCP_41: pulumi up creates the node service account and attaches it to node pools; actAs on an account that does not exist yet can only be granted on the project
  # checkov:skip=CKV_GCP_49: same reason: serviceAccountUser/Admin on the project, because the accounts pulumi up creates and uses do not exist before it runs
  # checkov:skip=CKV_GCP_42: this is the deploy account: pulumi up creates the GKE cluster (container.admin), TPU7x workload policies (compute.admin) and the node service account (iam.serviceAccountAdmin); only protected GitHub environments can impersonate it
  for_each = toset(var.deploy_roles)
  project  = var.project_id
  role     = each.value
  member   = "serviceAccount:${local.deploy_email}"
}

# The stack binds the workloads' account on its buckets, and the deploy workflow uploads
# the app bundle to one of them.
resource "google_storage_bucket_iam_member" "deploy" {
  for_each = toset(var.buckets)
  bucket   = each.value
  role     = var.deploy_bucket_role
  member   = "serviceAccount:${local.deploy_email}"
}

resource "google_storage_bucket_iam_member" "deploy_bundles" {
  count  = var.bundle_bucket == null ? 0 : 1
  bucket = var.bundle_bucket
  role   = var.deploy_bundle_role
  member = "serviceAccount:${local.deploy_email}"
}

# Budgets live on the billing account (billingAccounts.budgets.create checks
# billing.budgets.create there): https://cloud.google.com/billing/docs/how-to/budget-api-access-control
resource "google_billing_account_iam_member" "deploy" {
  count              = var.billing_account == null ? 0 : 1
  billing_account_id = var.billing_account
  role               = var.deploy_billing_role
  member             = "serviceAccount:${local.deploy_email}"
}

# The program binds roles to the node service account: the deploy account may grant
# those roles and no others (an IAM condition on the granted roles).
resource "google_project_iam_member" "deploy_grants_node_roles" {
  # checkov:skip=CKV_GCP_42: projectIamAdmin is limited by the IAM condition below to granting the node service account's roles
  # checkov:skip=CKV_GCP_49: same: the condition admits only grants of grantable_roles, none of which impersonates or manages service accounts
  project = var.project_id
  role    = "roles/resourcemanager.projectIamAdmin"
  member  = "serviceAccount:${local.deploy_email}"

  condition {
    title       = "tpuray-node-roles-only"
    description = "Grant and revoke only the roles of the GKE node service account"
    expression  = "api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', []).hasOnly(${jsonencode(var.grantable_roles)})"
  }
}

resource "google_project_iam_member" "preview" {
  for_each = toset(var.preview_roles)
  project  = var.project_id
  role     = each.value
  member   = "serviceAccount:${local.preview_email}"
}
