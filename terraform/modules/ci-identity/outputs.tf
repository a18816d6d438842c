output "workload_identity_provider" {
  description = "Full name of the OIDC provider (the google-github-actions/auth input); null outside the home environment."
  value       = var.home ? google_iam_workload_identity_pool_provider.github[0].name : null
}

output "deploy_member" {
  description = "IAM member of this environment's deploy service account."
  value       = local.deploy_member
}

output "preview_member" {
  description = "IAM member of the preview service account."
  value       = "serviceAccount:${local.preview_email}"
}

output "deploy_email" {
  description = "Email of this environment's deploy service account."
  value       = google_service_account.deploy.email
}

output "preview_email" {
  description = "Email of the preview service account."
  value       = local.preview_email
}
