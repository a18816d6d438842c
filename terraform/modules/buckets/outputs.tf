output "buckets" {
  description = "Names of the workload buckets."
  value       = [for b in google_storage_bucket.workloads : b.name]
}
