output "secrets_kms_key" {
  description = "Full resource name of the GKE secrets-encryption key, projects/P/locations/L/keyRings/R/cryptoKeys/K."
  value       = google_kms_crypto_key.gke_secrets.id
  # The grant must exist before a cluster names the key.
  depends_on = [google_kms_crypto_key_iam_member.gke_service_agent]
}

output "artifacts_kms_key" {
  description = "Full resource name of the key that encrypts the Artifact Registry repositories."
  value       = google_kms_crypto_key.artifacts.id
  depends_on  = [google_kms_crypto_key_iam_member.artifact_registry_service_agent]
}

output "pulumi_secrets_key" {
  description = "Full resource name of the Pulumi stack's secrets key: the stack file's secretsprovider is gcpkms://<this>."
  value       = google_kms_crypto_key.pulumi_secrets.id
}
