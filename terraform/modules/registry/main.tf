# Artifact Registry: the docker repository the deploy workflow pushes the images to, and
# optional remote repositories (read-through caches) for Docker Hub and PyPI.
# https://cloud.google.com/artifact-registry/docs/repositories/remote-repo
resource "google_artifact_registry_repository" "images" {
  project       = var.project_id
  location      = var.region
  repository_id = var.repository_id
  description   = "tpuray images (Ray TPU and Serve LLM), pushed by the deploy workflow"
  format        = "DOCKER"
  mode          = "STANDARD_REPOSITORY"
  kms_key_name  = var.kms_key_name

  docker_config {
    immutable_tags = var.immutable_tags
  }
}

resource "google_artifact_registry_repository" "dockerhub" {
  count         = var.remote_proxies ? 1 : 0
  project       = var.project_id
  location      = var.region
  repository_id = "${var.repository_id}-dockerhub"
  description   = "Read-through cache of Docker Hub (rayproject/ray images) for private nodes"
  format        = "DOCKER"
  mode          = "REMOTE_REPOSITORY"
  kms_key_name  = var.kms_key_name

  remote_repository_config {
    description = "Docker Hub"
    docker_repository {
      public_repository = "DOCKER_HUB"
    }
  }
}

resource "google_artifact_registry_repository" "pypi" {
  count         = var.remote_proxies ? 1 : 0
  project       = var.project_id
  location      = var.region
  repository_id = "${var.repository_id}-pypi"
  description   = "Read-through cache of PyPI for runtime_env pip installs on private nodes"
  format        = "PYTHON"
  mode          = "REMOTE_REPOSITORY"
  kms_key_name  = var.kms_key_name

  remote_repository_config {
    description = "PyPI"
    python_repository {
      public_repository = "PYPI"
    }
  }
}

resource "google_artifact_registry_repository_iam_member" "writers" {
  for_each   = var.writers
  project    = var.project_id
  location   = var.region
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.writer"
  member     = each.value
}
