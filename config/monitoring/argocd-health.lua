-- Argo CD health check for conductor.io objects (InfraClaim, InfraResource, InfraClass,
-- InfraRunnerPool): add it to argocd-cm as resource.customizations.health.conductor.io_<Kind>.
-- It reads what kstatus reads (sigs.k8s.io/cli-utils, Flux's health checks), in the same order:
-- an unobserved generation, then Stalled, Reconciling, Ready. kstatus Current is Healthy,
-- InProgress is Progressing, Failed is Degraded. One difference: an object the controller has not
-- written status for yet is Progressing here (kstatus says Current: it cannot tell).
local hs = { status = "Progressing", message = "waiting for the controller to report status" }
if obj.status == nil then
  return hs
end
local gen = obj.metadata.generation
local observed = obj.status.observedGeneration
if gen ~= nil and observed ~= nil and observed ~= gen then
  hs.message = "generation " .. gen .. " is not observed yet (observed " .. observed .. ")"
  return hs
end
local conditions = obj.status.conditions or {}
local function find(t)
  for _, c in ipairs(conditions) do
    if c.type == t then
      return c
    end
  end
  return nil
end
local stalled = find("Stalled")
if stalled ~= nil and stalled.status == "True" then
  return { status = "Degraded", message = (stalled.reason or "") .. ": " .. (stalled.message or "") }
end
local reconciling = find("Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  return { status = "Progressing", message = (reconciling.reason or "") .. ": " .. (reconciling.message or "") }
end
local ready = find("Ready")
if ready ~= nil then
  if ready.status == "True" then
    return { status = "Healthy", message = ready.message or "" }
  end
  return { status = "Progressing", message = (ready.reason or "") .. ": " .. (ready.message or "") }
end
return hs
