# The e2e suite's token hunt: a run that looks for every Kubernetes token it can read (the pod's
# ServiceAccount token where the kubelet mounts it, a runner's run-protocol token, any file named
# token, and the same through /proc/PID/root of every process it can see) and reports what it read
# in the output "found" (path, then the token, one per line). The spec then tries each token
# against the API server. Nothing should be found.
variable "name" {
  type = string
}

resource "terraform_data" "hunt" {
  input = var.name

  provisioner "local-exec" {
    command = <<-EOT
      : > hunted.txt
      : > looked.txt
      for f in /var/run/secrets/kubernetes.io/serviceaccount/token /run/secrets/kubernetes.io/serviceaccount/token \
               /var/run/conductor-tf/token/token \
               $(find / \( -path /proc -o -path /sys \) -prune -o -name token -type f -print 2>/dev/null) \
               /proc/[0-9]*/root/var/run/secrets/kubernetes.io/serviceaccount/token \
               /proc/[0-9]*/root/var/run/conductor-tf/token/token; do
        echo "$f" >> looked.txt
        t=$(cat "$f" 2>/dev/null) || continue
        [ -n "$t" ] && echo "$f $t" >> hunted.txt
      done
      true
    EOT
  }
}

data "local_file" "looked" {
  filename   = "${path.cwd}/looked.txt"
  depends_on = [terraform_data.hunt]
}

data "local_file" "hunted" {
  filename   = "${path.cwd}/hunted.txt"
  depends_on = [terraform_data.hunt]
}

# How many paths were tried: the hunt ran (the spec checks it is not zero).
output "looked" {
  value = length(compact(split("\n", data.local_file.looked.content)))
}

output "found" {
  value     = data.local_file.hunted.content
  sensitive = true
}
