output "buckets" {
  description = "Names of the workload buckets."
  value       = [for b in google_storage_bucket.workloads : b.name]
}

output "bundle_bucket" {
  description = "Name of the app bundle bucket (null when the environment declares none)."
  value       = var.bundle_bucket == null ? null : google_storage_bucket.bundles[0].name
}
