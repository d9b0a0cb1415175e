# A module typed as public modules are (Terraform >= 1.3): object variables with optional
# attributes and defaults, nested, inside lists and maps, beside tuples, sets and any. It writes the
# values Terraform gave it to a file, so a spec can see which defaults were filled in.
terraform {
  required_providers {
    local = {
      source  = "hashicorp/local"
      version = ">= 2.4.0"
    }
  }
}

variable "path" {
  type        = string
  description = "Absolute path of the file the values are written to."
}

variable "settings" {
  type = object({
    name = string
    size = optional(number, 10)
    tier = optional(string, "standard")
    tags = optional(map(string), {})
    backup = optional(object({
      enabled   = optional(bool, true)
      retention = optional(number, 7)
    }), {})
    zones = optional(list(string))
  })
  description = "An object with optional attributes, one of them an object with defaults of its own."
}

variable "rules" {
  type = list(object({
    port     = number
    protocol = optional(string, "tcp")
  }))
  default = []
}

variable "limits" {
  type = map(object({
    cpu    = optional(string, "100m")
    memory = string
  }))
  default = {}
}

variable "pair" {
  type    = tuple([string, number])
  default = ["a", 1]
}

variable "labels" {
  type    = set(string)
  default = []
}

variable "anything" {
  type    = any
  default = null
}

resource "local_file" "this" {
  filename = var.path
  content = jsonencode({
    settings = var.settings
    rules    = var.rules
    limits   = var.limits
    pair     = var.pair
    labels   = var.labels
    anything = var.anything
  })
}

output "size" {
  value = var.settings.size
}

output "retention" {
  value = var.settings.backup.retention
}
