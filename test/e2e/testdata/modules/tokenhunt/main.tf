# The e2e suite's token hunt: a run that looks for every Kubernetes token it can read (the pod's
# ServiceAccount token where the kubelet mounts it, a runner's run-protocol token, any file named
# token, and the same through /proc/PID/root of every process it can see) and reports what it read
# in the output "found" (path, then the token, one per line). The spec then tries each token
# against the API server. Nothing should be found. Then it dials the manager's run protocol as a
# runner of its own pool, with the manager's binary and a runner pod's token path, to take other
# runs; what happened is the output "dialed".
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

  provisioner "local-exec" {
    command = <<-EOT
      if [ -x /usr/local/bin/manager ]; then
        timeout 20 /usr/local/bin/manager runner --name thief --pool "$POOL" \
          --manager conductor-tf-runs.conductor-system.svc:9443 --state-url https://conductor-tf-runs.conductor-system.svc:9444 \
          --ca-file /var/run/conductor-tf/ca/ca.crt --token-file /var/run/conductor-tf/token/token \
          --work-dir "$PWD/thief" --run-sandbox none > dialed.txt 2>&1
        echo "exit $?" >> dialed.txt
      else
        echo "no manager binary" > dialed.txt
      fi
    EOT
    environment = {
      POOL = var.pool
    }
  }
}

variable "pool" {
  type    = string
  default = ""
}

data "local_file" "dialed" {
  filename   = "${path.cwd}/dialed.txt"
  depends_on = [terraform_data.hunt]
}

output "dialed" {
  value = data.local_file.dialed.content
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
