variable "project_id" {
  type        = string
  description = "Project of the key ring."
}

variable "region" {
  type        = string
  description = "Location of the key ring: the GKE cluster's region (GKE asks for the key in the cluster's location)."
}

variable "key_ring" {
  type        = string
  description = "Name of the key ring (key rings cannot be deleted: pick it once)."
  default     = "tpuray"

  validation {
    condition     = can(regex("^[a-zA-Z0-9_-]{1,63}$", var.key_ring))
    error_message = "kms.key_ring must be 1-63 letters, digits, underscores or hyphens."
  }
}

variable "rotation_period" {
  type        = string
  description = "Rotation period of the keys, in seconds with an s suffix; at most 90 days (7776000s)."
  default     = "7776000s"

  validation {
    condition     = try(tonumber(trimsuffix(var.rotation_period, "s")) >= 86400 && tonumber(trimsuffix(var.rotation_period, "s")) <= 7776000 && endswith(var.rotation_period, "s"), false)
    error_message = "kms.rotation_period must be between 86400s (1 day) and 7776000s (90 days), e.g. \"7776000s\"."
  }
}

variable "pulumi_secrets_users" {
  type        = map(string)
  description = "Members that may encrypt and decrypt with the Pulumi secrets key, by a static label: the environment's deploy account only."
  default     = {}
}
