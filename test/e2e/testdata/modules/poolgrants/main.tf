# The e2e suite's probe of what a runner pool grants its runs (issue 45): its apply fails unless
# the run sees the pool's env variable, reads the file of the pool's mounted ConfigMap, and sees
# none of the runner's own variables the pool does not name.
variable "name" {
  type = string
}

resource "terraform_data" "probe" {
  input = var.name

  provisioner "local-exec" {
    command = <<-EOT
      set -e
      if [ "$E2E_POOL_MARK" != "granted" ]; then echo "the pool's env did not reach the run: E2E_POOL_MARK=$E2E_POOL_MARK" >&2; exit 1; fi
      if [ "$(cat /etc/e2e-pool/mark)" != "mounted" ]; then echo "the pool's volume is not readable" >&2; exit 1; fi
      if [ -n "$POD_NAME" ]; then echo "the runner's POD_NAME reached the run" >&2; exit 1; fi
    EOT
  }
}

output "probed" {
  value = terraform_data.probe.output
}
