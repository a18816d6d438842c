# Exactly the outputs of modules/foundation: the fields of tpuray.config.TerraformOutputs
# plus github_variables (tests/test_foundation.py checks both).
output "network" {
  description = "VPC name -> tpuray:cluster.network."
  value       = module.foundation.network
}

output "subnetwork" {
  description = "Subnetwork name -> tpuray:cluster.subnetwork."
  value       = module.foundation.subnetwork
}

output "pods_range_name" {
  description = "Secondary range for Pods -> tpuray:cluster.podsRangeName."
  value       = module.foundation.pods_range_name
}

output "services_range_name" {
  description = "Secondary range for Services -> tpuray:cluster.servicesRangeName."
  value       = module.foundation.services_range_name
}

output "secrets_kms_key" {
  description = "GKE secrets-encryption key -> tpuray:cluster.secretsKmsKey."
  value       = module.foundation.secrets_kms_key
}

output "image_repository" {
  description = "Docker repository -> tpuray:images.repository."
  value       = module.foundation.image_repository
}

output "reservations" {
  description = "Capacity-tier reservation name -> real reservation name."
  value       = module.foundation.reservations
}

output "github_variables" {
  description = "Repository variables the workflows read; empty outside the CI home."
  value       = module.foundation.github_variables
}

output "github_environment_variables" {
  description = "Variables of this environment's GitHub environment (gh variable set NAME --env ENV)."
  value       = module.foundation.github_environment_variables
}
