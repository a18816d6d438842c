output "network" {
  description = "Name of the VPC."
  value       = google_compute_network.vpc.name
}

output "subnetwork" {
  description = "Name of the GKE subnetwork."
  value       = google_compute_subnetwork.gke.name
}

output "pods_range_name" {
  description = "Name of the subnetwork's secondary range for Pods."
  value       = google_compute_subnetwork.gke.secondary_ip_range[0].range_name
}

output "services_range_name" {
  description = "Name of the subnetwork's secondary range for Services."
  value       = google_compute_subnetwork.gke.secondary_ip_range[1].range_name
}

output "proxy_only_subnetwork" {
  description = "Name of the proxy-only subnet (null when the environment declares none)."
  value       = var.proxy_only_cidr == null ? null : google_compute_subnetwork.proxy_only[0].name
}
