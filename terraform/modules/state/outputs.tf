output "bucket" {
  description = "Name of the state bucket."
  value       = google_storage_bucket.state.name
}

output "pulumi_backend_url" {
  description = "The Pulumi backend URL of the bucket (pulumi login ...)."
  value       = "gs://${google_storage_bucket.state.name}"
}
