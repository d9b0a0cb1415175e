# Writes what a run's processes see of Kubernetes credentials: the KUBECONFIG and KUBE_CONFIG_PATH
# variables and the content of the file the latter names (empty when unset).
variable "out" {
  type = string
}

variable "run" {
  type        = string
  description = "Changes per run, so that each apply runs the provisioner again."
}

resource "terraform_data" "probe" {
  triggers_replace = [var.run]

  provisioner "local-exec" {
    command = "{ echo \"KUBECONFIG=$KUBECONFIG\"; echo \"KUBE_CONFIG_PATH=$KUBE_CONFIG_PATH\"; if [ -n \"$KUBE_CONFIG_PATH\" ]; then cat \"$KUBE_CONFIG_PATH\"; fi; } > \"$OUT\""
    environment = {
      OUT = var.out
    }
  }
}
