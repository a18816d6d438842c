output "image_repository" {
  description = "Path of the docker repository, REGION-docker.pkg.dev/PROJECT/REPO."
  value       = "${google_artifact_registry_repository.images.location}-docker.pkg.dev/${google_artifact_registry_repository.images.project}/${google_artifact_registry_repository.images.repository_id}"
}

output "docker_hub_proxy" {
  description = "Path of the Docker Hub read-through repository (null without remote_proxies)."
  value       = var.remote_proxies ? "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.dockerhub[0].repository_id}" : null
}

output "pypi_proxy" {
  description = "PyPI simple index of the read-through repository (null without remote_proxies)."
  value       = var.remote_proxies ? "https://${var.region}-python.pkg.dev/${var.project_id}/${google_artifact_registry_repository.pypi[0].repository_id}/simple/" : null
}
