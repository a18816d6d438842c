# The workload buckets a stack's gs:// URIs name: checkpoints, training data, model weights
# (tpuray:workloads.train.dataUri / storageUri, serve.checkpointUri / modelSource), and the
# bundle bucket of tpuray:workloads.bundleUri (below). In the cluster's region, so slices read and write
# in-region; uniform bucket-level access (IAM only, no object ACLs: the stack grants the
# workloads' account its roles per bucket), public access prevented, versioned with
# overwritten or deleted versions kept for noncurrent_days.
resource "google_storage_bucket" "workloads" {
  # checkov:skip=CKV_GCP_62: object access is recorded by Cloud Audit Logs (enable Data Access logs for GCS); a usage-log bucket would need its own log bucket
  for_each                    = toset(var.buckets)
  project                     = var.project_id
  name                        = each.value
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
      days_since_noncurrent_time = var.noncurrent_days
    }
    action {
      type = "Delete"
    }
  }

  lifecycle {
    prevent_destroy = true
  }
}

# The app bundles (tpuray:workloads.bundleUri): the code every Ray pod runs (runtime_env
# working_dir, which Ray downloads and unpacks with no integrity check). Only the deploy account
# writes here, and only new objects: it holds objectCreator and objectViewer, not delete, and
# Cloud Storage needs storage.objects.delete to overwrite an object
# (https://cloud.google.com/storage/docs/access-control/iam-permissions, storage.objects.create).
# The workloads' accounts read it (modules/ci-identity). The retention policy holds every object
# for retention_days: "objects in the bucket can only be deleted or replaced once their age is
# greater than the retention period" (https://cloud.google.com/storage/docs/bucket-lock), so not
# even a project admin can swap a bundle a running job uses. Nothing here is ever replaced, so no
# versioning.
resource "google_storage_bucket" "bundles" {
  # checkov:skip=CKV_GCP_62: object access is recorded by Cloud Audit Logs (enable Data Access logs for GCS); a usage-log bucket would need its own log bucket
  # checkov:skip=CKV_GCP_78: no object is ever replaced (the retention policy refuses it and the only writer cannot delete), so there is no earlier version to keep
  count                       = var.bundle_bucket == null ? 0 : 1
  project                     = var.project_id
  name                        = var.bundle_bucket
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false

  retention_policy {
    retention_period = var.bundle_retention_days * 86400
    is_locked        = var.bundle_retention_locked
  }

  lifecycle {
    prevent_destroy = true
  }
}
