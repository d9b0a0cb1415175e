# A run that goes looking for what is not its own: the controller's kubeconfig and every run's
# working directory (variables, granted kubeconfigs) under the controller's work dir. It writes one
# line per file tried, "readable PATH" or "denied PATH", to a file outside Terraform; its own
# variables file is tried last, to show that reading works at all.
variable "report" {
  type        = string
  description = "Absolute path of the file the findings are written to."
}

variable "work" {
  type        = string
  description = "The controller's --work-dir."
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
        for f in "$KUBECONFIG_FILE" "$WORK"/runs/*/conductor.tfvars.json "$WORK"/runs/*/conductor.kubeconfig; do
          case "$f" in "$PWD"/*) continue ;; esac
          [ -e "$f" ] || continue
          if cat "$f" >/dev/null 2>&1; then echo "readable $f"; else echo "denied $f"; fi
        done
        if cat conductor.tfvars.json >/dev/null 2>&1; then echo "readable $PWD/conductor.tfvars.json"; else echo "denied $PWD/conductor.tfvars.json"; fi
      } > "$REPORT"
    EOT
    environment = {
      REPORT          = var.report
      WORK            = var.work
      KUBECONFIG_FILE = var.kubeconfig
    }
  }
}

output "report" {
  value = terraform_data.hunt.output
}
