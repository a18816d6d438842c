terraform {
  required_version = ">= 1.5.0"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
  }
  # The bucket comes from -backend-config=bucket=... (the TF_STATE_BUCKET output of the
  # CI home); docs/foundation.md has the first apply, before the bucket exists.
  backend "gcs" {
    prefix = "terraform/foundation/staging"
  }
}
