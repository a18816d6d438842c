# A state bucket: an environment's Pulumi state (pulumi login gs://BUCKET), or, in the CI
# home, the foundations' Terraform state: versioned, uniform bucket-level access (IAM only),
# public access prevented.
resource "google_storage_bucket" "state" {
  # checkov:skip=CKV_GCP_62: access to state objects is recorded by Cloud Audit Logs (enable Data Access logs for GCS); a usage-log bucket would need its own log bucket
  project                     = var.project_id
  name                        = var.bucket
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false

  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      num_newer_versions = var.noncurrent_versions
      with_state         = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  lifecycle {
    prevent_destroy = true
  }
}

resource "google_storage_bucket_iam_member" "object_users" {
  for_each = var.object_users
  bucket   = google_storage_bucket.state.name
  role     = "roles/storage.objectUser"
  member   = each.value
}

resource "google_storage_bucket_iam_member" "object_viewers" {
  for_each = var.object_viewers
  bucket   = google_storage_bucket.state.name
  role     = "roles/storage.objectViewer"
  member   = each.value
}

resource "google_storage_bucket_iam_member" "bucket_readers" {
  for_each = var.bucket_readers
  bucket   = google_storage_bucket.state.name
  role     = "roles/storage.legacyBucketReader"
  member   = each.value
}
