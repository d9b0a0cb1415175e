# server = "rook-objectstore": an ObjectStore object for a Rook-style MinIO operator, which runs the
# servers itself. Its CRD must be installed (test/fixtures/crds has a copy).
resource "kubernetes_manifest" "object_store" {
  count = local.run_server ? 0 : 1
  manifest = {
    apiVersion = "minio.rook.io/v1alpha1"
    kind       = "ObjectStore"
    metadata = {
      name      = var.name
      namespace = kubernetes_namespace_v1.this.metadata[0].name
      labels    = local.labels
    }
    spec = {
      scope = {
        nodeCount = var.node_count
        volumeClaimTemplates = [{
          metadata = { name = "${var.name}-data" }
          spec = {
            accessModes = ["ReadWriteOnce"]
            resources   = { requests = { storage = "${var.storage_gib}Gi" } }
          }
        }]
      }
      credentials = {
        name      = kubernetes_secret_v1.credentials.metadata[0].name
        namespace = kubernetes_secret_v1.credentials.metadata[0].namespace
      }
      clusterDomain = var.cluster_domain
    }
  }
}
