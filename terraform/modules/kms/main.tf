# The key GKE encrypts Kubernetes Secrets with (application-layer secrets encryption),
# one for the Artifact Registry repositories, and the Pulumi stack's secrets provider
# (`secretsprovider: gcpkms://...` in stacks/Pulumi.<env>.yaml), which only the environment's
# deploy account may use: a pull request's code never can decrypt the stack's secrets. GKE uses the key through its service
# agent, which needs Encrypter/Decrypter on it:
# https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets
data "google_project" "this" {
  project_id = var.project_id
}

resource "google_kms_key_ring" "this" {
  project  = var.project_id
  name     = var.key_ring
  location = var.region
}

resource "google_kms_crypto_key" "gke_secrets" {
  name            = "gke-secrets"
  key_ring        = google_kms_key_ring.this.id
  purpose         = "ENCRYPT_DECRYPT"
  rotation_period = var.rotation_period

  lifecycle {
    prevent_destroy = true
  }
}

resource "google_kms_crypto_key" "artifacts" {
  name            = "artifacts"
  key_ring        = google_kms_key_ring.this.id
  purpose         = "ENCRYPT_DECRYPT"
  rotation_period = var.rotation_period

  lifecycle {
    prevent_destroy = true
  }
}

resource "google_kms_crypto_key" "pulumi_secrets" {
  name            = "pulumi-secrets"
  key_ring        = google_kms_key_ring.this.id
  purpose         = "ENCRYPT_DECRYPT"
  rotation_period = var.rotation_period

  lifecycle {
    prevent_destroy = true
  }
}

# Pulumi's cloud secrets manager unwraps the stack's data key with this key whenever it loads
# the stack (pulumi/pulumi pkg/secrets/cloud/manager.go, newCloudSecretsManager: keeper.Decrypt
# of the encrypted data key), so only the deploy account gets Encrypter/Decrypter.
resource "google_kms_crypto_key_iam_member" "pulumi_secrets" {
  for_each      = var.pulumi_secrets_users
  crypto_key_id = google_kms_crypto_key.pulumi_secrets.id
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = each.value
}

resource "google_kms_crypto_key_iam_member" "gke_service_agent" {
  crypto_key_id = google_kms_crypto_key.gke_secrets.id
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = "serviceAccount:service-${data.google_project.this.number}@container-engine-robot.iam.gserviceaccount.com"
}

resource "google_kms_crypto_key_iam_member" "artifact_registry_service_agent" {
  crypto_key_id = google_kms_crypto_key.artifacts.id
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-artifactregistry.iam.gserviceaccount.com"
}
