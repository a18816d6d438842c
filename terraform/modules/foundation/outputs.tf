# One output per field of tpuray.config.TerraformOutputs (same name), plus the GitHub
# variables the workflows read. A stack maps each field to the output of the same name.
output "network" {
  description = "VPC name -> tpuray:cluster.network."
  value       = module.network.network
}

output "subnetwork" {
  description = "Subnetwork name -> tpuray:cluster.subnetwork."
  value       = module.network.subnetwork
}

output "pods_range_name" {
  description = "Secondary range for Pods -> tpuray:cluster.podsRangeName."
  value       = module.network.pods_range_name
}

output "services_range_name" {
  description = "Secondary range for Services -> tpuray:cluster.servicesRangeName."
  value       = module.network.services_range_name
}

output "secrets_kms_key" {
  description = "GKE secrets-encryption key -> tpuray:cluster.secretsKmsKey."
  value       = module.kms.secrets_kms_key
}

output "image_repository" {
  description = "Docker repository REGION-docker.pkg.dev/PROJECT/REPO -> tpuray:images.repository."
  value       = module.registry.image_repository
}

output "reservations" {
  description = "Capacity-tier reservation name -> real reservation name; a stack names an entry as reservations.<name>."
  value       = module.reservations.reservations
}

output "github_variables" {
  description = "Repository variables the workflows read (gh variable set NAME --body VALUE); empty outside the CI home environment."
  value = var.ci.home ? tomap({
    GCP_WORKLOAD_IDENTITY_PROVIDER = module.ci_identity.workload_identity_provider
    GCP_PREVIEW_SERVICE_ACCOUNT    = module.ci_identity.preview_email
    TF_STATE_BUCKET                = module.state[0].bucket
  }) : tomap({})
}

output "github_environment_variables" {
  description = "Variables of this environment's GitHub environment (gh variable set NAME --env ENV --body VALUE): its own deploy account and Pulumi backend."
  value = tomap({
    GCP_DEPLOY_SERVICE_ACCOUNT = module.ci_identity.deploy_email
    PULUMI_BACKEND_URL         = module.pulumi_state.pulumi_backend_url
  })
}
