output "reservations" {
  description = "Name a stack's capacity tier uses -> the real reservation name."
  value       = merge(var.existing_reservations, { for key, r in google_compute_reservation.tpu : key => r.name })
}
