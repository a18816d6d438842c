variable "project_id" {
  type        = string
  description = "Project of the buckets."
}

variable "location" {
  type        = string
  description = "Location of the buckets: the cluster's region."
}

variable "buckets" {
  type        = list(string)
  description = "Names of the buckets to create (globally unique)."

  validation {
    condition     = alltrue([for b in var.buckets : can(regex("^[a-z0-9][-_a-z0-9]{1,61}[a-z0-9]$", b)) && !startswith(b, "goog")])
    error_message = "buckets must be 3-63 lowercase letters, digits, hyphens or underscores, not starting with goog."
  }
}

variable "bundle_bucket" {
  type        = string
  description = "Name of the bucket of the app bundles (tpuray:workloads.bundleUri); null: none."
  default     = null

  validation {
    condition     = var.bundle_bucket == null || try(can(regex("^[a-z0-9][-_a-z0-9]{1,61}[a-z0-9]$", var.bundle_bucket)) && !startswith(var.bundle_bucket, "goog"), false)
    error_message = "bundle_bucket must be 3-63 lowercase letters, digits, hyphens or underscores, not starting with goog."
  }
}

variable "bundle_retention_days" {
  type        = number
  description = "Days each app bundle is held: until then nobody can delete or replace it (the bucket's retention policy)."
  default     = 30

  validation {
    condition     = var.bundle_retention_days >= 1
    error_message = "bundle_retention_days must be at least 1."
  }
}

variable "bundle_retention_locked" {
  type        = bool
  description = "Lock the bundle bucket's retention policy: then it can never be removed or shortened, and the bucket cannot be deleted before every object is past it (irreversible: https://cloud.google.com/storage/docs/bucket-lock)."
  default     = false
}

variable "noncurrent_days" {
  type        = number
  description = "Days an overwritten or deleted object version is kept before it is deleted."
  default     = 7

  validation {
    condition     = var.noncurrent_days >= 1
    error_message = "buckets.noncurrent_days must be at least 1."
  }
}
