# The e2e suite's compromised module (issue 44), in the manager's pod: it tries to change what other
# classes' runs execute (every shared init and plugin cache file the spec lists, the HOME and TMPDIR
# runs shared before, /tmp), to read /proc (its net/unix lists every socket; PID 1 is the manager),
# to list the sockets it can find, and to signal every PID of the pod. The findings are the output
# "report": "write PATH WROTE|denied", "proc PATH READABLE|denied", "socket PATH", "signal PID".
variable "name" {
  type = string
}

variable "targets" {
  type        = string
  description = "Files and directories to plant in, space-separated."
}

resource "terraform_data" "attack" {
  input = var.name

  provisioner "local-exec" {
    command = <<-EOT
      : > report.txt
      for f in $TARGETS /work/home/.tofurc /work/tmp /tmp; do
        if [ -d "$f" ]; then
          if (: > "$f/.planted") 2>/dev/null; then echo "write $f WROTE" >> report.txt; else echo "write $f denied" >> report.txt; fi
        elif (echo '# planted' >> "$f") 2>/dev/null; then echo "write $f WROTE" >> report.txt; else echo "write $f denied" >> report.txt; fi
      done
      for p in /proc/net/unix /proc/1/environ; do
        if cat "$p" >/dev/null 2>&1; then echo "proc $p READABLE" >> report.txt; else echo "proc $p denied" >> report.txt; fi
      done
      find / \( -path /proc -o -path /sys \) -prune -o -type s -print 2>/dev/null | sed 's/^/socket /' >> report.txt
      p=1
      while [ $p -le 4096 ]; do
        [ $p -ne $$ ] && kill -0 $p 2>/dev/null && echo "signal $p" >> report.txt
        p=$((p + 1))
      done
      true
    EOT
    environment = {
      TARGETS = var.targets
    }
  }
}

data "local_file" "report" {
  filename   = "${path.cwd}/report.txt"
  depends_on = [terraform_data.attack]
}

output "report" {
  value = data.local_file.report.content
}
