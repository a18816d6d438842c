variable "project_id" {
  type        = string
  description = "Project of the repositories."
}

variable "region" {
  type        = string
  description = "Location of the repositories (the cluster's region: pulls stay in-region)."
}

variable "repository_id" {
  type        = string
  description = "ID of the docker repository for the images built from images/; the remote proxies are named <id>-dockerhub and <id>-pypi."
  default     = "tpuray"

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,53}[a-z0-9])?$", var.repository_id))
    error_message = "registry.repository_id must be a lowercase name of at most 55 characters (letters, digits, hyphens)."
  }
}

variable "remote_proxies" {
  type        = bool
  description = "Also declare remote repositories proxying Docker Hub and PyPI, so that nodes pull base images and wheels through Private Google Access, with no internet path."
  default     = true
}

variable "immutable_tags" {
  type        = bool
  description = "Refuse to move a tag of the docker repository to another digest once pushed."
  default     = true
}

variable "kms_key_name" {
  type        = string
  description = "Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K) that encrypts the repositories' content (CMEK); null keeps Google-managed encryption."
  default     = null
}

variable "writers" {
  type        = map(string)
  description = "Members allowed to push to the docker repository, by a static label (e.g. {deploy = \"serviceAccount:...\"})."
  default     = {}
}
