package hub

import (
	"encoding/json"
	"time"

	"github.com/thehub/hub/models"
)

// The bodies of the hub API's answers. The OpenAPI document's schemas are
// generated from these types (schema.go): a field added here is
// documented, and a field served but missing here fails the tests
// (apitest.CheckResponses). Tags: json as usual (omitempty only for a
// field that is really left out sometimes), enum and nullable as schema.go
// says, doc for a description.

// Values of the enums defined here.
const (
	settingScopeGlobal = "global"
	settingScopeSite   = "site"
	addonEnabled       = "enabled"
	addonDisabled      = "disabled"
)

// recordRef names another record: the spaces of a site, the groups of a
// user, the data store of an IP address.
type recordRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
}

// taskRef is the answer of a request that goes on in the background.
type taskRef struct {
	TaskID string `json:"task_id" doc:"The Temporal workflow id of the work."`
}

// detailResponse is a message.
type detailResponse struct {
	Detail string `json:"detail"`
}

// Auth.

type tokenPairResponse struct {
	Access  string `json:"access"`
	Refresh string `json:"refresh"`
}

type accessTokenResponse struct {
	Access string `json:"access"`
}

type emptyResponse struct{}

type publicKeyResponse struct {
	Algorithm string `json:"algorithm"`
	PublicKey string `json:"public_key" doc:"PEM."`
}

type idpTokenResponse struct {
	tokenPairResponse
	User userResponse `json:"user"`
}

type clientKeyResponse struct {
	ID      int64     `json:"id"`
	URL     string    `json:"url"`
	Name    string    `json:"name"`
	User    string    `json:"user" doc:"The owner's username."`
	Created time.Time `json:"created"`
}

type newClientKeyResponse struct {
	clientKeyResponse
	APIKey string `json:"api_key" doc:"The key, shown this once only: send it as Authorization: Api-Key <key>."`
}

// Users, groups, permissions.

type userResponse struct {
	ID          int64            `json:"id"`
	URL         string           `json:"url"`
	Username    string           `json:"username"`
	Email       string           `json:"email"`
	FirstName   string           `json:"first_name"`
	LastName    string           `json:"last_name"`
	DateJoined  time.Time        `json:"date_joined"`
	LastLogin   *time.Time       `json:"last_login"`
	IsActive    bool             `json:"is_active"`
	IsSuperuser bool             `json:"is_superuser"`
	Groups      []recordRef      `json:"groups"`
	NASUser     *nasUserResponse `json:"nas_user" doc:"Null unless the user is a NAS user."`
	Profile     userProfile      `json:"profile"`
}

type nasUserResponse struct {
	AllowSSH     bool   `json:"allow_ssh"`
	PrimaryGroup string `json:"primary_group"`
	UID          *int64 `json:"uid"`
}

type userProfile struct {
	Country     string `json:"country"`
	Department  string `json:"department"`
	LineManager string `json:"line_manager"`
	Phone       string `json:"phone"`
	Timezone    string `json:"timezone"`
	DefaultSite *int64 `json:"default_site"`
	HomeSite    *int64 `json:"home_site"`
}

type nasSyncResponse struct {
	TaskID string   `json:"task_id"`
	Sites  []string `json:"sites" nullable:"true"`
	Users  int      `json:"users" doc:"How many NAS users are sent."`
}

type groupResponse struct {
	ID          int64    `json:"id"`
	URL         string   `json:"url"`
	Name        string   `json:"name"`
	Permissions []string `json:"permissions" doc:"Codenames."`
	Users       []string `json:"users" doc:"Usernames."`
}

type permissionResponse struct {
	ID       int64  `json:"id"`
	AppLabel string `json:"app_label"`
	Codename string `json:"codename"`
	Model    string `json:"model"`
	Name     string `json:"name"`
}

type myPermissionsResponse struct {
	GroupPermissions       []permissionResponse `json:"group_permissions"`
	UserPermissions        []permissionResponse `json:"user_permissions"`
	GroupObjectPermissions []map[string]any     `json:"group_object_permissions" doc:"Always empty."`
	UserObjectPermissions  []map[string]any     `json:"user_object_permissions" doc:"Always empty."`
}

// Health.

type healthResponse struct {
	OverallHealth string             `json:"overall_health" enum:"health"`
	HubStatus     hubHealth          `json:"hub_status"`
	SiteStatus    []siteHealthStatus `json:"site_status"`
}

type hubHealth struct {
	Health string `json:"health" enum:"health"`
}

type siteHealthStatus struct {
	Site   string        `json:"site"`
	Health string        `json:"health" enum:"health"`
	Nodes  []nodeHealth  `json:"nodes"`
	Queues []queueHealth `json:"queues"`
}

type nodeHealth struct {
	Name             string     `json:"name"`
	Health           string     `json:"health" enum:"health"`
	Online           bool       `json:"online"`
	HasDefaultQueue  bool       `json:"has_default_queue"`
	LastHeartbeat    *time.Time `json:"last_heartbeat"`
	WorkerVersion    string     `json:"worker_version"`
	EngineVersion    string     `json:"engine_version"`
	AnalyticsVersion string     `json:"analytics_version"`
	SearchVersion    string     `json:"search_version"`
}

type queueHealth struct {
	Name          string     `json:"name"`
	Health        string     `json:"health" enum:"health"`
	Online        bool       `json:"online"`
	LastHeartbeat *time.Time `json:"last_heartbeat"`
}

type siteHealthResponse struct {
	ID          int64      `json:"id"`
	URL         string     `json:"url"`
	Name        string     `json:"name"`
	Label       string     `json:"label"`
	RefreshedAt *time.Time `json:"refreshed_at"`
	siteHealthStatus
}

// Catalogue.

type featureResponse struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
}

type fileStatusTypeResponse struct {
	Key             string `json:"key"`
	Label           string `json:"label"`
	BackgroundColor string `json:"background_color"`
	TextColor       string `json:"text_color"`
	URL             string `json:"url"`
}

type certificateLifetimeResponse struct {
	ID          int64      `json:"id"`
	URL         string     `json:"url"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Days        int64      `json:"days"`
	UpdatedAt   *time.Time `json:"updated_at"`
	UpdatedBy   *int64     `json:"updated_by" doc:"The id of the user who last changed days."`
}

type tagResponse struct {
	Name string `json:"name"`
}

type siteCertificateResponse struct {
	Site          string    `json:"site"`
	Node          *string   `json:"node"`
	CommonName    string    `json:"common_name"`
	Certificate   string    `json:"certificate" doc:"PEM."`
	CACertificate string    `json:"ca_certificate" doc:"PEM."`
	Expires       time.Time `json:"expires"`
	Serial        string    `json:"serial"`
	PrivateKey    string    `json:"private_key,omitempty" doc:"PEM; only when the hub made the key (no csr was sent)."`
}

// Operations.

type alertResponse struct {
	ID         int64     `json:"id"`
	URL        string    `json:"url"`
	Name       string    `json:"name"`
	Node       string    `json:"node"`
	Queue      string    `json:"queue"`
	Severity   string    `json:"severity" enum:"alert_severity"`
	Site       string    `json:"site"`
	Summary    string    `json:"summary"`
	Suppressed bool      `json:"suppressed"`
	Timestamp  time.Time `json:"timestamp"`
	Created    time.Time `json:"created"`
}

type actionResponse struct {
	ID      int64     `json:"id"`
	URL     string    `json:"url"`
	Action  string    `json:"action"`
	State   string    `json:"state" enum:"action_state"`
	Created time.Time `json:"created"`
}

type actionDetailResponse struct {
	actionResponse
	Results string `json:"results"`
	User    *int64 `json:"user"`
}

type nodeResponse struct {
	ID              int64      `json:"id"`
	URL             string     `json:"url"`
	Name            string     `json:"name"`
	Site            string     `json:"site"`
	LastHeartbeat   *time.Time `json:"last_heartbeat"`
	Online          bool       `json:"online"`
	HasDefaultQueue bool       `json:"has_default_queue"`
}

type queueResponse struct {
	ID            int64      `json:"id"`
	URL           string     `json:"url"`
	Name          string     `json:"name"`
	Label         string     `json:"label"`
	LastHeartbeat *time.Time `json:"last_heartbeat"`
	Online        bool       `json:"online"`
	Nodes         []string   `json:"nodes" doc:"Names of the nodes serving the queue."`
	Site          string     `json:"site"`
}

// Settings.

type settingResponse struct {
	ID    int64           `json:"id"`
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
	Desc  string          `json:"desc"`
	Scope string          `json:"scope" enum:"setting_scope"`
}

type settingsTaskRef struct {
	Site   string `json:"site"`
	TaskID int64  `json:"task_id" doc:"The id of the settings task (GET /api/settingstasks/{id}/)."`
}

type settingsTasksResponse struct {
	Tasks []settingsTaskRef `json:"tasks"`
}

type settingsTaskResponse struct {
	ID       int64      `json:"id"`
	URL      string     `json:"url"`
	TaskID   string     `json:"task_id"`
	TaskType string     `json:"tasktype" enum:"settings_task"`
	Job      *int64     `json:"job"`
	Site     string     `json:"site"`
	Started  *time.Time `json:"started"`
	State    string     `json:"state" enum:"task_state"`
}

type settingsTaskDetailResponse struct {
	settingsTaskResponse
	Completed    *time.Time      `json:"completed"`
	FriendlyName string          `json:"friendly_name"`
	Runtime      *float64        `json:"runtime" doc:"Seconds, once completed."`
	Request      json.RawMessage `json:"request"`
	Results      json.RawMessage `json:"results"`
}

// Workflow definitions.

type workflowResponse struct {
	ID               int64                           `json:"id"`
	URL              string                          `json:"url"`
	Name             string                          `json:"name"`
	Label            string                          `json:"label"`
	Discovery        *string                         `json:"discovery" enum:"discovery"`
	DiscoveryOptions map[string]any                  `json:"discovery_options"`
	Fields           map[string]models.WorkflowField `json:"fields"`
	FilterRules      []models.FilterRule             `json:"filter_rules"`
	IconClasses      any                             `json:"icon_classes" doc:"An object or a list."`
	Enabled          bool                            `json:"enabled"`
	Visible          bool                            `json:"visible"`
	ScheduleOnly     bool                            `json:"schedule_only"`
	ExternalOnly     bool                            `json:"external_only"`
	PreferredQueue   string                          `json:"preferred_queue"`
	Builtin          bool                            `json:"builtin"`
}

// Sites and spaces.

type siteResponse struct {
	ID                        int64          `json:"id"`
	URL                       string         `json:"url"`
	Name                      string         `json:"name"`
	Label                     string         `json:"label"`
	Shortcode                 string         `json:"shortcode"`
	Type                      string         `json:"type"`
	Timezone                  string         `json:"timezone"`
	PublicURL                 string         `json:"public_url"`
	StorageSearchURL          string         `json:"storage_search_url"`
	SearchengineURL           string         `json:"searchengine_url"`
	Bandwidth                 int64          `json:"bandwidth"`
	Color                     []int64        `json:"color"`
	AmIConfigured             bool           `json:"am_i_configured"`
	ReadyToConfigure          bool           `json:"ready_to_configure"`
	Editable                  bool           `json:"editable" doc:"Whether the caller may change the site."`
	AddonEnabled              bool           `json:"addon_enabled"`
	DirectoriesCount          int64          `json:"directories_count"`
	FilesCount                int64          `json:"files_count"`
	FilesHydratedCount        int64          `json:"files_hydrated_count"`
	FilesStubbedCount         int64          `json:"files_stubbed_count"`
	EnableAutoFileBatchSizing bool           `json:"enable_auto_file_batch_sizing"`
	FileBatchGB               int64          `json:"file_batch_gb"`
	FileBatchSize             int64          `json:"file_batch_size"`
	FSIscanBuckets            int64          `json:"fs_iscan_buckets"`
	FSIscanThreads            int64          `json:"fs_iscan_threads"`
	LockThreshold             int64          `json:"lock_threshold"`
	Include                   map[string]any `json:"include"`
	Exclude                   map[string]any `json:"exclude"`
	Spaces                    []recordRef    `json:"spaces"`
}

type spaceResponse struct {
	ID               int64                     `json:"id"`
	UUID             string                    `json:"uuid"`
	URL              string                    `json:"url"`
	Name             string                    `json:"name"`
	Mountpoint       string                    `json:"mountpoint"`
	Size             *int64                    `json:"size"`
	PermissionMode   string                    `json:"permission_mode"`
	Color            []int64                   `json:"color"`
	Created          time.Time                 `json:"created"`
	Editable         bool                      `json:"editable" doc:"Whether the caller may change the space (never when immutable)."`
	IsReady          bool                      `json:"is_ready" doc:"Whether the space's folder is ready on every site."`
	NestedShares     []nestedShare             `json:"nested_shares"`
	Relationships    spaceRelationships        `json:"relationships"`
	Sites            []spaceSiteResponse       `json:"sites"`
	Immutable        bool                      `json:"immutable"`
	OnSites          map[string]any            `json:"on_sites"`
	SnapshotSchedule *snapshotScheduleResponse `json:"snapshot_schedule"`
	Profile          *string                   `json:"profile" doc:"The storage-management (C+J) profile of a space at /spaces/<name>, shared with its C+J items; null when none."`
}

// filesetResponse is one fileset of a site (GET /filesets/): without GPFS,
// the folder of one of the site's spaces.
type filesetResponse struct {
	Name       string `json:"name" doc:"The fileset's name: the last part of its path."`
	Path       string `json:"path" doc:"Its junction path inside the site root: the space's mountpoint."`
	Site       string `json:"site"`
	Space      int64  `json:"space" doc:"The id of the space whose folder it is."`
	SpaceName  string `json:"space_name"`
	CJSpace    bool   `json:"cj_space" doc:"Whether it is also a space of the storage-management (C+J) API (its path is /spaces/<name>)."`
	State      string `json:"state" doc:"pending, ready or error: whether the folder is made on the site."`
	Error      string `json:"error" doc:"Why making the folder failed, empty otherwise."`
	Quota      *int64 `json:"quota" doc:"The space's size in bytes; null: as large as the system allows."`
	Pool       string `json:"pool" doc:"The site's default storage pool, empty until the site is refreshed."`
	Filesystem string `json:"filesystem" doc:"The filesystem of that pool (ext4, xfs, gpfs, ...)."`
}

type spaceSiteResponse struct {
	ID    string  `json:"id" doc:"The site's id, as a string."`
	Name  string  `json:"name"`
	Label string  `json:"label"`
	Pool  string  `json:"pool" doc:"The site's default storage pool."`
	Usage []int64 `json:"usage"`
	Addon string  `json:"addon" enum:"addon"`
	State string  `json:"state" enum:"space_site_state"`
	Error string  `json:"error"`
}

type nestedShare struct {
	ID   int64  `json:"id"`
	Type string `json:"type" enum:"share_type"`
	Name string `json:"name"`
	Path string `json:"path"`
	URL  string `json:"url"`
}

type spaceRelationships struct {
	Sites     int `json:"sites"`
	NFSShares int `json:"nfs_shares"`
	SMBShares int `json:"smb_shares"`
}

type snapshotScheduleResponse struct {
	ID        int64  `json:"id"`
	Space     int64  `json:"space"`
	Duration  string `json:"duration"`
	Frequency string `json:"frequency"`
	Time      string `json:"time"`
}

// Files.

type fileResponse struct {
	Path            string         `json:"path"`
	Name            string         `json:"name"`
	Type            string         `json:"type" enum:"file_type"`
	Site            string         `json:"site"`
	Size            int64          `json:"size"`
	DataSize        int64          `json:"data_size"`
	DiskUsage       int64          `json:"disk_usage"`
	PathDepth       int            `json:"path_depth"`
	TotalFiles      *int64         `json:"total_files"`
	Atime           time.Time      `json:"atime"`
	Ctime           time.Time      `json:"ctime"`
	Mtime           time.Time      `json:"mtime"`
	TimeRefreshed   time.Time      `json:"time_refreshed"`
	Deleted         bool           `json:"deleted"`
	Restricted      bool           `json:"restricted"`
	Status          string         `json:"status"`
	Error           string         `json:"error"`
	Metadata        map[string]any `json:"metadata"`
	RemoteLocations map[string]any `json:"remote_locations" nullable:"true"`
	Children        string         `json:"children"`
	ImagePreview    *string        `json:"image_preview" doc:"Always null: the hub makes no previews."`
	Thumbnail       *string        `json:"thumbnail" doc:"Always null."`
	VideoPreview    *string        `json:"video_preview" doc:"Always null."`
	URL             string         `json:"url"`
}

// fileErrorResponse stands, in a space's listing, for a site that could
// not list the space.
type fileErrorResponse struct {
	Path  string `json:"path"`
	Site  string `json:"site"`
	Error string `json:"error"`
}

// browsePage is what the page of GET /api/file/ adds to the envelope.
type browsePage struct {
	Path  string       `json:"path"`
	Entry fileResponse `json:"entry" doc:"The directory listed."`
}

// Storage.

type storagePoolResponse struct {
	ID         int64     `json:"id"`
	URL        string    `json:"url"`
	Name       string    `json:"name"`
	Filesystem string    `json:"filesystem"`
	Capacity   int64     `json:"capacity"`
	FreeSpace  int64     `json:"free_space"`
	UsedSpace  int64     `json:"used_space"`
	IsDefault  bool      `json:"is_default"`
	Site       int64     `json:"site"`
	UpdatedAt  time.Time `json:"updated_at"`
}

type serverResponse struct {
	ID               int64          `json:"id"`
	URL              string         `json:"url"`
	Name             string         `json:"name"`
	Site             int64          `json:"site"`
	ListOfInterfaces map[string]any `json:"list_of_interfaces"`
	UpdatedAt        time.Time      `json:"updated_at"`
}

type datastoreResponse struct {
	ID              int64  `json:"id"`
	URL             string `json:"url"`
	Name            string `json:"name"`
	Type            string `json:"type"`
	AccessKeyID     string `json:"accesskeyid"`
	Bucket          string `json:"bucket"`
	Container       string `json:"container"`
	CredentialsFile string `json:"credentialsfile"`
	Endpoint        string `json:"endpoint"`
	Region          string `json:"region"`
	StorageAccount  string `json:"storageaccount"`
}

type ipAddressResponse struct {
	ID        int64      `json:"id"`
	URL       string     `json:"url"`
	IPAddr    string     `json:"ipaddr"`
	Datastore *recordRef `json:"datastore"`
}

// locationResponse are the connection fields buckets and external
// targets share. No secret is ever answered, not even sealed.
type locationResponse struct {
	Endpoint              string         `json:"endpoint"`
	Port                  *int64         `json:"port"`
	Scheme                string         `json:"scheme"`
	Region                string         `json:"region"`
	SSLVerify             bool           `json:"ssl_verify"`
	Container             string         `json:"container"`
	StorageAccount        string         `json:"storage_account"`
	MigrationTargetFolder string         `json:"migration_target_folder"`
	AdvancedSettings      map[string]any `json:"advanced_settings"`
}

type bucketResponse struct {
	ID              int64   `json:"id"`
	URL             string  `json:"url"`
	Name            string  `json:"name"`
	Label           string  `json:"label"`
	StorageType     string  `json:"storage_type"`
	CredentialsFile string  `json:"credentials_file"`
	ExternalTargets []int64 `json:"external_targets" doc:"Ids of the targets in the bucket."`
	SoftDeleting    bool    `json:"soft_deleting" doc:"Being deleted: no longer changeable."`
	locationResponse
}

type deletedBucketResponse struct {
	bucketResponse
	TaskID string `json:"task_id" doc:"The workflow removing the bucket from the sites, then the record."`
}

type externalTargetResponse struct {
	ID               int64           `json:"id"`
	URL              string          `json:"url"`
	Name             string          `json:"name"`
	StorageType      string          `json:"storage_type"`
	LocalFileRegex   string          `json:"local_file_regex"`
	Enabled          bool            `json:"enabled"`
	BackupOnly       bool            `json:"backup_only"`
	BackupSite       *int64          `json:"backup_site"`
	AvailableOnSites []int64         `json:"available_on_sites" doc:"Site ids."`
	DeleteOnRecall   bool            `json:"delete_on_recall"`
	Bucket           *bucketResponse `json:"bucket"`
	locationResponse
}

type targetListingResponse struct {
	Path        string                `json:"path"`
	Marker      string                `json:"marker"`
	NextMarker  *string               `json:"next_marker" doc:"The marker of the next page; null on the last one."`
	Directories []targetEntryResponse `json:"directories"`
	Files       []targetEntryResponse `json:"files"`
	Summary     targetListingSummary  `json:"summary"`
}

type targetEntryResponse struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Size string `json:"size" doc:"Bytes, as a decimal string."`
	Type string `json:"type" enum:"file_type"`
}

type targetListingSummary struct {
	Directories int   `json:"directories"`
	Files       int   `json:"files"`
	TotalSize   int64 `json:"total_size" doc:"Bytes of the files of this page."`
	Truncated   bool  `json:"truncated" doc:"Whether there is a next page."`
}

type nfsShareResponse struct {
	ID      int64               `json:"id"`
	UUID    string              `json:"uuid"`
	URL     string              `json:"url"`
	Name    string              `json:"name"`
	Path    string              `json:"path"`
	Space   int64               `json:"space"`
	Clients []nfsClientResponse `json:"clients"`
}

type nfsClientResponse struct {
	ID               int64          `json:"id"`
	UUID             string         `json:"uuid"`
	NFSShare         int64          `json:"nfs_share"`
	Hosts            string         `json:"hosts"`
	AdvancedSettings map[string]any `json:"advanced_settings"`
	OnSites          map[string]any `json:"on_sites"`
	AnonymousGroupID *int64         `json:"anonymous_group_id"`
	AnonymousUserID  *int64         `json:"anonymous_user_id"`
	FSID             *int64         `json:"fsid"`
	Asynchronous     bool           `json:"asynchronous"`
	ForceAllUserID   bool           `json:"force_all_user_id"`
	ForceRootUserID  bool           `json:"force_root_user_id"`
	InsecurePorts    bool           `json:"insecure_ports"`
	ReadOnly         bool           `json:"read_only"`
	SubtreeCheck     bool           `json:"subtree_check"`
	WriteDelay       bool           `json:"write_delay"`
}

type smbShareResponse struct {
	ID                 int64          `json:"id"`
	UUID               string         `json:"uuid"`
	URL                string         `json:"url"`
	Name               string         `json:"name"`
	Space              int64          `json:"space"`
	Path               string         `json:"path"`
	ReadOnly           bool           `json:"read_only"`
	Visible            bool           `json:"visible"`
	GuestOK            bool           `json:"guest_ok"`
	HSMSupport         bool           `json:"hsm_support"`
	MultiThreadReads   bool           `json:"multi_thread_reads"`
	MultiThreadWrites  bool           `json:"multi_thread_writes"`
	RootShareLocking   bool           `json:"root_share_locking"`
	CreateMask         string         `json:"create_mask"`
	DirectoryMask      string         `json:"directory_mask"`
	ForceCreateMode    string         `json:"force_create_mode"`
	ForceDirectoryMode string         `json:"force_directory_mode"`
	AdminUsers         map[string]any `json:"admin_users"`
	AllowedUsers       map[string]any `json:"allowed_users"`
	HostsAllow         map[string]any `json:"hosts_allow"`
	HostsDeny          map[string]any `json:"hosts_deny"`
	AdvancedSettings   map[string]any `json:"advanced_settings"`
	OnSites            map[string]any `json:"on_sites"`
}

// Jobs, tasks, job stats.

type jobResponse struct {
	ID                 int64          `json:"id"`
	URL                string         `json:"url"`
	Workflow           string         `json:"workflow"`
	JobType            string         `json:"jobtype" doc:"The older revision's name of workflow."`
	Site               string         `json:"site"`
	Queue              string         `json:"queue"`
	Discovery          *string        `json:"discovery" enum:"job_discovery" doc:"recursive, snapdiff, policy (a policy's run: its scan on the site) or null."`
	Fields             map[string]any `json:"fields" nullable:"true"`
	State              string         `json:"state" enum:"job_state"`
	HasFailures        bool           `json:"has_failures" doc:"Some paths failed (a SUCCESS job may have failures)."`
	Error              string         `json:"error" doc:"Why the job failed, or why some of its paths did; empty otherwise."`
	Created            time.Time      `json:"created"`
	Started            *time.Time     `json:"started"`
	Completed          *time.Time     `json:"completed"`
	Runtime            *float64       `json:"runtime" doc:"Seconds since started, until completed."`
	Owner              jobOwnerRef    `json:"owner"`
	ClientKey          *string        `json:"clientkey" doc:"The name of the client key that started the job."`
	Schedule           *string        `json:"schedule" doc:"The name of the schedule that started the job."`
	DirWalkComplete    bool           `json:"dir_walk_complete"`
	IsSettingsJob      bool           `json:"is_settings_job"`
	FriendlyName       string         `json:"friendly_name"`
	Progress           float64        `json:"progress"`
	Paths              []string       `json:"paths" nullable:"true"`
	Include            []string       `json:"include" nullable:"true"`
	Exclude            []string       `json:"exclude" nullable:"true"`
	Run                int            `json:"run" doc:"How many times the job was resubmitted."`
	NumFiles           int64          `json:"numfiles"`
	NumProcessedFiles  int64          `json:"numprocessedfiles"`
	NumFailedFiles     int64          `json:"numfailedfiles"`
	NumSkippedFiles    int64          `json:"numskippedfiles"`
	NumAbortedFiles    int64          `json:"numabortedfiles"`
	NumCancelledFiles  int64          `json:"numcancelledfiles"`
	TemporalWorkflowID string         `json:"temporal_workflow_id"`
}

// jobOwnerRef names who started a job.
type jobOwnerRef struct {
	Type string `json:"type" enum:"owner_type"`
	ID   *int64 `json:"id" doc:"The user's id; -2 for the system, -1 when unknown."`
	Name string `json:"name"`
}

// jobsPage is what the page of GET /api/jobs/ adds to the envelope.
type jobsPage struct {
	Owners []models.JobOwner `json:"owners" doc:"The owners of all the jobs the filters match."`
}

type runWorkflowResponse struct {
	Site               string         `json:"site"`
	Workflow           string         `json:"workflow"`
	Discovery          *string        `json:"discovery" enum:"discovery"`
	Job                int64          `json:"job" doc:"The id of the job started."`
	Fields             map[string]any `json:"fields"`
	Paths              []string       `json:"paths"`
	Include            []string       `json:"include" nullable:"true"`
	Exclude            []string       `json:"exclude" nullable:"true"`
	Queue              string         `json:"queue"`
	IgnoreSiteIncludes bool           `json:"ignore_site_includes"`
	IgnoreSiteExcludes bool           `json:"ignore_site_excludes"`
	URL                string         `json:"url" doc:"The job's URL."`
}

type jobTypeChoice struct {
	Name  string `json:"name"`
	Label string `json:"label"`
}

type jobProgressResponse struct {
	ID                int64         `json:"id"`
	State             string        `json:"state" enum:"job_state"`
	Progress          float64       `json:"progress" doc:"Percent, 0 to 100."`
	DirWalkComplete   bool          `json:"dir_walk_complete"`
	NumFiles          int64         `json:"numfiles"`
	NumProcessedFiles int64         `json:"numprocessedfiles"`
	NumFailedFiles    int64         `json:"numfailedfiles"`
	NumSkippedFiles   int64         `json:"numskippedfiles"`
	NumAbortedFiles   int64         `json:"numabortedfiles"`
	NumCancelledFiles int64         `json:"numcancelledfiles"`
	Live              *liveProgress `json:"live" doc:"What the running job's workflow says; null once finished or when it does not answer in time."`
}

type liveProgress struct {
	JobID       int64  `json:"job_id"`
	State       string `json:"state"`
	Batches     int    `json:"batches"`
	BatchesDone int    `json:"batches_done"`
	InFlight    int    `json:"in_flight"`
	Paused      bool   `json:"paused"`
	// What the steps in flight report in their heartbeats.
	Steps     []liveStep `json:"steps" doc:"The job's steps running at its site, each with how far it is in its batch."`
	FilesDone int64      `json:"files_done" doc:"Paths the first steps in flight have finished; progress counts them."`
	BytesDone int64      `json:"bytes_done" doc:"Bytes of the paths the steps in flight have finished."`
	// FilesUnrecorded counts paths whose first step has ended while
	// their outcomes are being recorded.
	FilesUnrecorded int64 `json:"files_unrecorded" doc:"Paths whose batch's first step has ended and whose outcomes are being recorded; progress counts them."`
}

type liveStep struct {
	Step      string `json:"step"`
	StepIndex int    `json:"step_index" doc:"Index of the step in its batch's chain."`
	Run       int    `json:"run"`
	Batch     int    `json:"batch"`
	Files     int    `json:"files" doc:"Paths this step handles in the batch."`
	FilesDone int    `json:"files_done" doc:"Paths it has finished, whatever their outcome."`
	Bytes     int64  `json:"bytes" doc:"Sizes of those paths when the batch was discovered."`
	BytesDone int64  `json:"bytes_done" doc:"Sizes of the finished paths, moving a chunk of 100 paths at a time."`
}

type jobStatisticsResponse struct {
	ID    int64          `json:"id"`
	State string         `json:"state" enum:"job_state"`
	Files fileStatistics `json:"files"`
	Bytes int64          `json:"bytes" doc:"Logical bytes of the job's paths, as the site found them (a migrated file counts its original size; folders count 0); paths recorded before sizes were count 0."`
	Tasks taskStatistics `json:"tasks"`
}

type fileStatistics struct {
	Total        int64            `json:"total"`
	ByState      map[string]int64 `json:"by_state"`
	ByCode       map[string]int64 `json:"by_code"`
	BytesByState map[string]int64 `json:"bytes_by_state" doc:"Bytes of the paths by their latest state."`
}

type taskStatistics struct {
	Total   int64            `json:"total"`
	ByState map[string]int64 `json:"by_state"`
	ByType  map[string]int64 `json:"by_type"`
}

type jobStatResponse struct {
	ID      int64     `json:"id"`
	Job     int64     `json:"job"`
	Task    *int64    `json:"task"`
	Path    string    `json:"path"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
	State   string    `json:"state" enum:"path_state"`
	Updated time.Time `json:"updated"`
}

// jobStatItem is a job stat in a list, with its URL.
type jobStatItem struct {
	jobStatResponse
	URL string `json:"url"`
}

type jobStatHistoryResponse struct {
	ID      int64     `json:"id"`
	Job     int64     `json:"job"`
	Task    *int64    `json:"task"`
	Path    string    `json:"path"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
	State   string    `json:"state" enum:"path_state"`
	Created time.Time `json:"created"`
	JobStat *int64    `json:"jobstat" doc:"The id of the path's current job stat, if any."`
	URL     *string   `json:"url" doc:"The URL of that job stat."`
}

// jobStatHistoryPage is a page of job stat history inside another answer.
type jobStatHistoryPage struct {
	Count    int                      `json:"count"`
	Next     *string                  `json:"next"`
	Previous *string                  `json:"previous"`
	Results  []jobStatHistoryResponse `json:"results"`
}

type taskResponse struct {
	ID             int64      `json:"id"`
	URL            string     `json:"url"`
	Job            int64      `json:"job"`
	Site           string     `json:"site"`
	Queue          string     `json:"queue"`
	TaskType       string     `json:"tasktype"`
	TaskID         string     `json:"task_id"`
	State          string     `json:"state" enum:"task_state"`
	Created        time.Time  `json:"created"`
	Started        *time.Time `json:"started"`
	DynamicParents []int64    `json:"dynamic_parents"`
	Parents        string     `json:"parents" doc:"The parent task's id as text, or empty."`
}

type taskDetailResponse struct {
	taskResponse
	Completed    *time.Time     `json:"completed"`
	FriendlyName string         `json:"friendly_name"`
	Result       map[string]any `json:"result" nullable:"true"`
	Runtime      *string        `json:"runtime" doc:"[D ]HH:MM:SS[.ffffff] since started, until completed."`
	Paths        int64          `json:"paths" doc:"How many paths the task has."`
	Run          int            `json:"run"`
	Batch        int            `json:"batch"`
	Step         int            `json:"step"`
}

type taskFilesResponse struct {
	taskDetailResponse
	Files jobStatHistoryPage `json:"files"`
}

// Schedules and policies.

type scheduleResponse struct {
	ID               int64          `json:"id"`
	URL              string         `json:"url"`
	Name             string         `json:"name"`
	Site             string         `json:"site"`
	Space            *string        `json:"space" doc:"The space's name, or null."`
	Enabled          bool           `json:"enabled"`
	Minute           string         `json:"minute"`
	Hour             string         `json:"hour"`
	DayOfMonth       string         `json:"day_of_month"`
	DayOfWeek        string         `json:"day_of_week"`
	MonthOfYear      string         `json:"month_of_year"`
	Discovery        string         `json:"discovery" doc:"recursive, snapdiff or none."`
	DiscoveryOptions map[string]any `json:"discovery_options"`
	ManagedPaths     map[string]any `json:"managed_paths" doc:"Each managed path (absolute inside the site root) mapped to its options."`
	Workflows        string         `json:"workflows" doc:"The URL of the schedule's workflows."`
}

type scheduleWorkflowResponse struct {
	ID       int64          `json:"id"`
	URL      string         `json:"url"`
	Workflow string         `json:"workflow"`
	Site     string         `json:"site"`
	Queue    string         `json:"queue"`
	Fields   map[string]any `json:"fields" doc:"The workflow's runtime fields for the jobs it starts."`
}

type automatedScheduleResponse struct {
	Name                  string  `json:"name"`
	ScheduleType          string  `json:"schedule_type" doc:"schedule, policy or snapshot."`
	Enabled               bool    `json:"enabled"`
	Minute                string  `json:"minute"`
	Hour                  string  `json:"hour"`
	DayOfMonth            string  `json:"day_of_month"`
	DayOfWeek             string  `json:"day_of_week"`
	MonthOfYear           string  `json:"month_of_year"`
	DiscoveryID           *int64  `json:"discovery_id" doc:"The schedule's id (schedules only)."`
	DiscoveryManagedPaths *string `json:"discovery_managed_paths"`
	DiscoveryName         *string `json:"discovery_name"`
	DiscoveryWorkflow     *string `json:"discovery_workflow" doc:"The schedule's workflows, comma-separated."`
	PolicyID              *int64  `json:"policy_id"`
	PolicyName            *string `json:"policy_name"`
	SiteName              string  `json:"site_name"`
	Spaces                string  `json:"spaces" doc:"The names of the spaces concerned, comma-separated."`
	TemporalScheduleID    string  `json:"temporal_schedule_id" doc:"The ID of its Temporal Schedule, to find it in the Temporal Web UI."`
}

type policyOrder struct {
	ID      int64  `json:"id"`
	By      string `json:"by" doc:"atime, mtime, ctime, size or path."`
	Reverse bool   `json:"reverse"`
}

type policyResponse struct {
	ID              int64                   `json:"id"`
	URL             string                  `json:"url"`
	Created         time.Time               `json:"created"`
	Name            string                  `json:"name"`
	Enabled         bool                    `json:"enabled"`
	PolicyType      string                  `json:"policy_type" doc:"migration or premigration."`
	Filesystem      string                  `json:"filesystem"`
	Site            int64                   `json:"site"`
	Spaces          []int64                 `json:"spaces"`
	Threads         int                     `json:"threads"`
	Order           policyOrder             `json:"order"`
	Schedule        *models.PolicySchedule  `json:"schedule" doc:"null: the policy runs on its triggers (every 10 minutes) or only when asked."`
	Triggers        string                  `json:"triggers" doc:"The JSON text of the policy's triggers."`
	ConditionGroups []models.ConditionGroup `json:"condition_groups"`
	Job             *int64                  `json:"job,omitempty" doc:"The job of the run a create with run_immediately started."`
}

type policyRunResponse struct {
	ID  int64  `json:"id" doc:"The id of the job the run started."`
	Job string `json:"job" doc:"The job's URL."`
}
