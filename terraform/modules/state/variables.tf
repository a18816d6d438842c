variable "project_id" {
  type        = string
  description = "Project of the state bucket."
}

variable "location" {
  type        = string
  description = "Location of the state bucket."
}

variable "bucket" {
  type        = string
  description = "Name of the bucket: an environment's Pulumi state (.pulumi/), or the foundations' Terraform state (prefix terraform/foundation/<env>)."

  validation {
    condition     = can(regex("^[a-z0-9][-_a-z0-9]{1,61}[a-z0-9]$", var.bucket)) && !startswith(var.bucket, "goog")
    error_message = "state.bucket must be 3-63 lowercase letters, digits, hyphens or underscores, not starting with goog."
  }
}

variable "noncurrent_versions" {
  type        = number
  description = "How many older versions of each state object to keep (rollback after a bad update)."
  default     = 50

  validation {
    condition     = var.noncurrent_versions >= 1
    error_message = "state.noncurrent_versions must be at least 1."
  }
}

variable "object_users" {
  type        = map(string)
  description = "Members that read and write state objects (an environment's deploy account on its Pulumi state: state, history, backups, locks), by a static label."
  default     = {}
}

variable "object_viewers" {
  type        = map(string)
  description = "Members that only read state objects (the preview account on the Terraform state: terraform plan -lock=false), by a static label."
  default     = {}
}

variable "bucket_readers" {
  type        = map(string)
  description = "Members that may read the bucket's metadata (terraform plan refreshes it), by a static label."
  default     = {}
}
