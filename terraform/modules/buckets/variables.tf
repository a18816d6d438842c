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

variable "noncurrent_days" {
  type        = number
  description = "Days an overwritten or deleted object version is kept before it is deleted."
  default     = 7

  validation {
    condition     = var.noncurrent_days >= 1
    error_message = "buckets.noncurrent_days must be at least 1."
  }
}
