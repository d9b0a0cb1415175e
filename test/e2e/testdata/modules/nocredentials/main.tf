# The e2e suite's isolation probe: its apply fails unless the run finds no Kubernetes credentials
# where a pod's processes would: no API token mounted, no in-cluster address, no kubeconfig.
variable "name" {
  type = string
}

resource "terraform_data" "probe" {
  input = var.name

  provisioner "local-exec" {
    command = <<-EOT
      set -e
      if [ -e /var/run/secrets/kubernetes.io/serviceaccount/token ]; then echo "an API token is mounted" >&2; exit 1; fi
      if [ -n "$KUBERNETES_SERVICE_HOST" ] || [ -n "$KUBECONFIG" ] || [ -n "$KUBE_CONFIG_PATH" ]; then echo "Kubernetes settings in the environment" >&2; exit 1; fi
      if [ -e "$HOME/.kube/config" ]; then echo "a kubeconfig in HOME" >&2; exit 1; fi
    EOT
  }
}

output "probed" {
  value = terraform_data.probe.output
}
