# The workload buckets a stack's gs:// URIs name: app bundles and checkpoints, training
# data, model weights (tpuray:workloads.bundleUri, train.dataUri / storageUri,
# serve.checkpointUri / modelSource). In the cluster's region, so slices read and write
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
