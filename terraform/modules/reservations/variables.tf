variable "project_id" {
  type        = string
  description = "Project of the reservations."
}

variable "tpu_reservations" {
  type = map(object({
    zone         = string
    machine_type = string
    vm_count     = number
  }))
  description = <<-EOT
    Specific TPU reservations to declare, by the name a stack's capacity tier uses. The
    shape is the TPU VM machine type and the number of VMs (hosts per slice x slices, as
    `tpuray topology` prints them). Billing starts when a reservation is created.
  EOT
  default     = {}

  validation {
    condition     = alltrue([for name, _ in var.tpu_reservations : can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", name))])
    error_message = "tpu_reservations keys name Compute Engine reservations: lowercase letters, digits and hyphens, at most 63, starting with a letter."
  }

  validation {
    condition     = alltrue([for r in var.tpu_reservations : can(regex("^(ct[0-9]+[a-z]*-(standard|hightpu)-[0-9]+t|tpu7x-standard-4t)$", r.machine_type))])
    error_message = "tpu_reservations[*].machine_type must be a TPU VM machine type, e.g. ct6e-standard-4t or ct5lp-hightpu-8t (tpuray topology lists them)."
  }

  validation {
    condition     = alltrue([for r in var.tpu_reservations : r.vm_count >= 1 && floor(r.vm_count) == r.vm_count])
    error_message = "tpu_reservations[*].vm_count must be a whole number of VMs, at least 1."
  }

  validation {
    condition     = alltrue([for r in var.tpu_reservations : can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", r.zone))])
    error_message = "tpu_reservations[*].zone must be a zone, e.g. us-east5-b."
  }
}

variable "existing_reservations" {
  type        = map(string)
  description = "Reservations that exist already (created by your account team from a commitment), by the name a stack's capacity tier uses -> the reservation's real name."
  default     = {}

  validation {
    condition     = alltrue([for v in values(var.existing_reservations) : can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", v))])
    error_message = "existing_reservations values must be reservation names (lowercase letters, digits, hyphens)."
  }
}
