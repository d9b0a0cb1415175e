# A run that goes looking for what is not its own: the controller's kubeconfig and other runs'
# files (variables, granted kubeconfigs) under the controller's work dir, named by the test (a run
# cannot list the work dir). It writes one line per file tried, "readable PATH" or "denied PATH",
# to a file outside Terraform; its own variables file is tried last, to show that reading works.
variable "report" {
  type        = string
  description = "Absolute path of the file the findings are written to."
}

variable "paths" {
  type        = string
  description = "Other runs' files, space-separated."
}

variable "kubeconfig" {
  type        = string
  description = "The controller's kubeconfig."
}

resource "terraform_data" "hunt" {
  input = var.report

  provisioner "local-exec" {
    command = <<-EOT
      {
        for f in "$KUBECONFIG_FILE" $PATHS; do
          case "$f" in "$PWD"/*) continue ;; esac
          if cat "$f" >/dev/null 2>&1; then echo "readable $f"; else echo "denied $f"; fi
        done
        if cat conductor.tfvars.json >/dev/null 2>&1; then echo "readable $PWD/conductor.tfvars.json"; else echo "denied $PWD/conductor.tfvars.json"; fi
      } > "$REPORT"
    EOT
    environment = {
      REPORT          = var.report
      PATHS           = var.paths
      KUBECONFIG_FILE = var.kubeconfig
    }
  }
}

output "report" {
  value = terraform_data.hunt.output
}
