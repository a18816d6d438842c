variable "project_id" {
  type        = string
  description = "Project of the VPC."
}

variable "region" {
  type        = string
  description = "Region of the subnetwork, the Cloud Router and Cloud NAT (the GKE cluster's region)."
}

variable "name" {
  type        = string
  description = "Name of the VPC; the subnetwork, router and NAT are named after it."

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$", var.name))
    error_message = "network.name must be a lowercase name of at most 40 characters (letters, digits, hyphens; starts with a letter)."
  }
}

variable "subnet_cidr" {
  type        = string
  description = "Primary range of the subnetwork: one address per GKE node."

  validation {
    condition     = can(cidrnetmask(var.subnet_cidr))
    error_message = "network.subnet_cidr must be an IPv4 CIDR block, e.g. 10.20.0.0/20."
  }
}

variable "pods_cidr" {
  type        = string
  description = "Secondary range for GKE Pods (VPC-native cluster_secondary_range_name)."

  validation {
    condition     = can(cidrnetmask(var.pods_cidr)) && try(tonumber(split("/", var.pods_cidr)[1]) <= 21, false)
    error_message = "network.pods_cidr must be an IPv4 CIDR block of /21 or larger; GKE reserves a /24 per node by default."
  }
}

variable "services_cidr" {
  type        = string
  description = "Secondary range for GKE Services (VPC-native services_secondary_range_name)."

  validation {
    condition     = can(cidrnetmask(var.services_cidr)) && try(tonumber(split("/", var.services_cidr)[1]) <= 27, false)
    error_message = "network.services_cidr must be an IPv4 CIDR block of /27 or larger."
  }
}

variable "pods_range_name" {
  type        = string
  description = "Name of the Pods secondary range (what the stack's cluster.podsRangeName receives)."
  default     = "gke-pods"
}

variable "services_range_name" {
  type        = string
  description = "Name of the Services secondary range (what the stack's cluster.servicesRangeName receives)."
  default     = "gke-services"
}

variable "flow_log_sampling" {
  type        = number
  description = "Fraction of VPC flow logs kept on the subnetwork (0 < x <= 1)."
  default     = 0.5

  validation {
    condition     = var.flow_log_sampling > 0 && var.flow_log_sampling <= 1
    error_message = "network.flow_log_sampling must be in (0, 1]."
  }
}

variable "proxy_only_cidr" {
  type        = string
  description = "Range of the region's proxy-only subnet (REGIONAL_MANAGED_PROXY) for internal Application Load Balancers, which a stack's gke-l7-rilb Gateway needs (the stack's tpuray:workloads.serve.gateway.proxyOnlySubnetCidr); null creates none."
  default     = null

  validation {
    condition     = var.proxy_only_cidr == null || try(cidrnetmask(var.proxy_only_cidr) != "" && tonumber(split("/", var.proxy_only_cidr)[1]) <= 26, false)
    error_message = "network.proxy_only_cidr must be an IPv4 CIDR block of /26 or larger (64 addresses at least), e.g. 10.129.0.0/23."
  }
}
