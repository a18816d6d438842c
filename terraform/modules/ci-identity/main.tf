# GitHub Actions authenticate with Workload Identity Federation: no JSON keys.
# - The CI home (one environment) holds the pool, its GitHub OIDC provider and tpuray-preview,
#   the read-only account of pull-request jobs (terraform plan).
# - Every environment holds its own tpuray-deploy, in its own project, with roles in that project
#   only: only jobs running in the GitHub environment of the same name, on refs/heads/main, can
#   impersonate it (OIDC subject repo:OWNER/REPO:environment:NAME, and the provider's condition
#   on the ref). A dev job therefore holds no permission in staging's or prod's project.
# - The service accounts the stack's resources run as (GKE nodes, the Ray workloads' GSAs) are
#   created here, so the deploy account gets its grants on those accounts, not on the project.
locals {
  preview_email = var.home ? google_service_account.preview[0].email : "tpuray-preview@${var.ci_project_id}.iam.gserviceaccount.com"
  deploy_member = "serviceAccount:${google_service_account.deploy.email}"
  environments  = join(", ", [for e in var.deploy_environments : "'${e}'"])
  # The pool's full name: the resource in the CI home, built from the home's project number elsewhere.
  pool_name = var.home ? google_iam_workload_identity_pool.github[0].name : "projects/${data.google_project.ci[0].number}/locations/global/workloadIdentityPools/${var.pool_id}"
}

data "google_project" "ci" {
  count      = var.home ? 0 : 1
  project_id = var.ci_project_id
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
    "attribute.ref"         = "assertion.ref"
  }
  # Only this repository; a pull-request job (its ref is refs/pull/N/merge), or a job in one of the
  # deploy environments running on refs/heads/main (a push to main or a dispatch on main).
  # GitHub's claims: https://docs.github.com/en/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect
  attribute_condition = "assertion.repository == '${var.github_repository}' && ((assertion.event_name == 'pull_request' && assertion.ref.startsWith('refs/pull/')) || (assertion.environment in [${local.environments}] && assertion.ref == '${var.deploy_ref}'))"

  oidc {
    issuer_uri = "https://token.actions.githubusercontent.com"
  }
}

# This environment's deploy account, in this environment's project.
resource "google_service_account" "deploy" {
  project      = var.project_id
  account_id   = "tpuray-deploy"
  display_name = "tpuray deploy of ${var.environment} (pulumi up from the ${var.environment} GitHub environment)"
}

resource "google_service_account" "preview" {
  count        = var.home ? 1 : 0
  project      = var.project_id
  account_id   = "tpuray-preview"
  display_name = "tpuray preview (read-only, pull requests: terraform plan)"
}

# Only the job of this repository running in the GitHub environment named like this environment.
resource "google_service_account_iam_member" "deploy_from_environment" {
  service_account_id = google_service_account.deploy.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principal://iam.googleapis.com/${local.pool_name}/subject/repo:${var.github_repository}:environment:${var.environment}"
}

resource "google_service_account_iam_member" "preview_from_pull_requests" {
  count              = var.home ? 1 : 0
  service_account_id = google_service_account.preview[0].name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principal://iam.googleapis.com/${local.pool_name}/subject/repo:${var.github_repository}:pull_request"
}

resource "google_project_iam_member" "deploy" {
  # checkov:skip=CKV_GCP_42: this is the deploy account: pulumi up creates the GKE cluster (container.admin) and TPU7x workload policies (compute.admin); only the main branch's job in this environment can impersonate it
  for_each = toset(var.deploy_roles)
  project  = var.project_id
  role     = each.value
  member   = local.deploy_member
}

# The service accounts the stack's resources run as, created here so that the deploy account's
# grants name them: actAs on the node account (the cluster and its node pools run as it), and
# Service Account Admin on each workload GSA, where the stack binds its Kubernetes service
# accounts (setIamPolicy); on no other account of the project.
resource "google_service_account" "nodes" {
  project      = var.project_id
  account_id   = var.node_service_account
  display_name = "GKE nodes of the ${var.environment} cluster (least privilege)"
}

resource "google_service_account" "workloads" {
  for_each     = toset(var.workload_service_accounts)
  project      = var.project_id
  account_id   = each.value
  display_name = "Ray pods of the ${var.environment} cluster (Workload Identity)"
}

resource "google_service_account_iam_member" "deploy_acts_as_nodes" {
  service_account_id = "projects/${var.project_id}/serviceAccounts/${var.node_service_account}@${var.project_id}.iam.gserviceaccount.com"
  role               = "roles/iam.serviceAccountUser"
  member             = local.deploy_member
  depends_on         = [google_service_account.nodes]
}

resource "google_service_account_iam_member" "deploy_binds_workloads" {
  for_each           = toset(var.workload_service_accounts)
  service_account_id = "projects/${var.project_id}/serviceAccounts/${each.value}@${var.project_id}.iam.gserviceaccount.com"
  role               = "roles/iam.serviceAccountAdmin"
  member             = local.deploy_member
  depends_on         = [google_service_account.workloads]
}

# The stack binds the workloads' accounts on its workload buckets.
resource "google_storage_bucket_iam_member" "deploy" {
  for_each = toset(var.buckets)
  bucket   = each.value
  role     = var.deploy_bucket_role
  member   = local.deploy_member
}

# The bundle bucket: the deploy account adds objects and reads them back (to check what a name
# holds), and cannot delete, so never overwrite, one; the workloads' accounts read. The stack
# binds nothing there, so the deploy account needs no IAM admin on it.
resource "google_storage_bucket_iam_member" "deploy_bundles" {
  for_each = var.bundle_bucket == null ? toset([]) : toset(var.deploy_bundle_roles)
  bucket   = var.bundle_bucket
  role     = each.value
  member   = local.deploy_member
}

resource "google_storage_bucket_iam_member" "workloads_read_bundles" {
  for_each   = var.bundle_bucket == null ? toset([]) : toset(var.workload_service_accounts)
  bucket     = var.bundle_bucket
  role       = "roles/storage.objectViewer"
  member     = "serviceAccount:${each.value}@${var.project_id}.iam.gserviceaccount.com"
  depends_on = [google_service_account.workloads]
}

# Budgets live on the billing account (billingAccounts.budgets.create checks
# billing.budgets.create there): https://cloud.google.com/billing/docs/how-to/budget-api-access-control
resource "google_billing_account_iam_member" "deploy" {
  count              = var.billing_account == null ? 0 : 1
  billing_account_id = var.billing_account
  role               = var.deploy_billing_role
  member             = local.deploy_member
}

# A stack that enforces Binary Authorization writes the project's singleton policy
# (tpuray:cluster.binaryAuthorization.enforce; projects.updatePolicy needs binaryauthorization.policy.update).
resource "google_project_iam_member" "deploy_binary_authorization" {
  count   = var.binary_authorization ? 1 : 0
  project = var.project_id
  role    = "roles/binaryauthorization.policyEditor"
  member  = local.deploy_member
}

# The program binds roles to the node service account: the deploy account may grant
# those roles and no others (an IAM condition on the granted roles).
resource "google_project_iam_member" "deploy_grants_node_roles" {
  # checkov:skip=CKV_GCP_42: projectIamAdmin is limited by the IAM condition below to granting the node service account's roles
  # checkov:skip=CKV_GCP_49: same: the condition admits only grants of grantable_roles, none of which impersonates or manages service accounts
  project = var.project_id
  role    = "roles/resourcemanager.projectIamAdmin"
  member  = local.deploy_member

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
