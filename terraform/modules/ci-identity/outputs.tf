output "workload_identity_provider" {
  description = "Full name of the OIDC provider (the google-github-actions/auth input); null outside the home environment."
  value       = var.home ? google_iam_workload_identity_pool_provider.github[0].name : null
}

output "deploy_member" {
  description = "IAM member of the deploy service account."
  value       = "serviceAccount:${local.deploy_email}"
}

output "preview_member" {
  description = "IAM member of the preview service account."
  value       = "serviceAccount:${local.preview_email}"
}

output "deploy_email" {
  description = "Email of the deploy service account."
  value       = local.deploy_email
}

output "preview_email" {
  description = "Email of the preview service account."
  value       = local.preview_email
}
