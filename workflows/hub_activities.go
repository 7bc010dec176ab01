package workflows

// Names of the hub activities (methods of activities/hub.Activities, which
// the hub worker registers) that workflows call. Workflows name them
// rather than import the hub's database code; a test checks that every
// name is a registered activity.
const (
	actDeliverChanges          = "DeliverChanges"
	actClaimChange             = "ClaimChange"
	actBucketSites             = "BucketSites"
	actCJFinishChange          = "CJFinishChange"
	actCJPrepareChange         = "CJPrepareChange"
	actCJStartChange           = "CJStartChange"
	actCJStoreDatastores       = "CJStoreDatastores"
	actClearBucketSoftDeleting = "ClearBucketSoftDeleting"
	actCollectPlan             = "CollectPlan"
	actDeleteBucketRecord      = "DeleteBucketRecord"
	actFailedPathsPage         = "FailedPathsPage"
	actFireSchedule            = "FireSchedule"
	actFirePolicy              = "FirePolicy"
	actPolicyPlan              = "PolicyPlan"
	actSnapshotPlan            = "SnapshotPlan"
	actWaitJobs                = "WaitJobs"
	actFinishJob               = "FinishJob"
	actFinishSettingsTask      = "FinishSettingsTask"
	actFinishTask              = "FinishTask"
	actImportSiteSettings      = "ImportSiteSettings"
	actJobPathsPage            = "JobPathsPage"
	actJobSite                 = "JobSite"
	actListRemoteTarget        = "ListRemoteTarget"
	actListSites               = "ListSites"
	actLoadJobPlan             = "LoadJobPlan"
	actMaintain                = "Maintain"
	actNASUsersPlan            = "NASUsersPlan"
	actRecordAction            = "RecordAction"
	actRecordDiscovery         = "RecordDiscovery"
	actRecordHeartbeat         = "RecordHeartbeat"
	actRecordIndexFields       = "RecordIndexFields"
	actRecordSpaceSite         = "RecordSpaceSite"
	actSetJobState             = "SetJobState"
	actShareOnSite             = "ShareOnSite"
	actStartSettingsTasks      = "StartSettingsTasks"
	actStartTask               = "StartTask"
	actStoreSiteInventory      = "StoreSiteInventory"
)

// HubActivityNames lists every hub activity a workflow calls.
var HubActivityNames = []string{
	actStoreSearchPage, actFinishSearchSite, actFinishSearch,
	actStoreAnalytics,
	actDeliverChanges,
	actClaimChange,
	actBucketSites,
	actCJFinishChange,
	actCJPrepareChange,
	actCJStartChange,
	actCJStoreDatastores,
	actClearBucketSoftDeleting,
	actCollectPlan,
	actDeleteBucketRecord,
	actFailedPathsPage,
	actFireSchedule,
	actFirePolicy,
	actPolicyPlan,
	actSnapshotPlan,
	actWaitJobs,
	actFinishJob,
	actFinishSettingsTask,
	actFinishTask,
	actImportSiteSettings,
	actJobPathsPage,
	actJobSite,
	actListRemoteTarget,
	actListSites,
	actLoadJobPlan,
	actMaintain,
	actNASUsersPlan,
	actRecordAction,
	actRecordDiscovery,
	actRecordHeartbeat,
	actRecordIndexFields,
	actRecordSpaceSite,
	actSetJobState,
	actShareOnSite,
	actStartSettingsTasks,
	actStartTask,
	actStoreSiteInventory,
}
