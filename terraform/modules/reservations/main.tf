# Optional specific TPU reservations. TPU capacity normally comes through a commitment
# approved by Google Cloud sales: the account team creates the reservation, which then
# goes in existing_reservations instead of being declared here.
# https://cloud.google.com/tpu/docs/request-all-capacity-mode-reservation
resource "google_compute_reservation" "tpu" {
  for_each                      = var.tpu_reservations
  project                       = var.project_id
  name                          = each.key
  zone                          = each.value.zone
  specific_reservation_required = true

  specific_reservation {
    count = each.value.vm_count
    instance_properties {
      machine_type = each.value.machine_type
    }
  }

  lifecycle {
    precondition {
      condition     = !contains(keys(var.existing_reservations), each.key)
      error_message = "Reservation ${each.key} is both declared (tpu_reservations) and existing (existing_reservations): keep it in one."
    }
  }
}
