// A Database operator written the way the kubebuilder tutorials write one, so that
// `cargo xtask bench --comparison` can measure this project's controller against it on
// the same machine and the same benchmark. It is not part of the product: nothing else
// builds it, and it does only what those tutorials do (a StatefulSet and a headless
// Service per Database, the finalizer added with Update, the status written with
// Update once the StatefulSet is ready).
//
// It takes the flags the benchmark gives the project's controller; those it has no
// use for are accepted and ignored.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const finalizer = "mycompany.io/finalizer"

var groupVersion = schema.GroupVersion{Group: "mycompany.io", Version: "v1"}

// DatabaseSpec holds the fields this operator reads; the API server keeps the rest.
type DatabaseSpec struct {
	Engine   string `json:"engine"`
	Version  string `json:"version"`
	Storage  string `json:"storage"`
	Replicas *int32 `json:"replicas,omitempty"`
}

// DatabaseStatus holds the fields this operator writes.
type DatabaseStatus struct {
	Phase              string `json:"phase,omitempty"`
	Ready              bool   `json:"ready"`
	Replicas           int32  `json:"replicas"`
	Endpoint           string `json:"endpoint,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DatabaseSpec   `json:"spec,omitempty"`
	Status            DatabaseStatus `json:"status,omitempty"`
}

type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}

func (in *Database) DeepCopyInto(out *Database) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec.Replicas != nil {
		replicas := *in.Spec.Replicas
		out.Spec.Replicas = &replicas
	}
}

func (in *Database) DeepCopyObject() runtime.Object {
	out := &Database{}
	in.DeepCopyInto(out)
	return out
}

func (in *DatabaseList) DeepCopyObject() runtime.Object {
	out := &DatabaseList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Database, len(in.Items))
	for i := range in.Items {
		in.Items[i].DeepCopyInto(&out.Items[i])
	}
	return out
}

var ports = map[string]int32{"postgres": 5432, "mysql": 3306, "mongodb": 27017}

type reconciler struct {
	client.Client
}

// The benchmark times the cold start by the project's reconcile counter, so this
// operator keeps one of the same name.
var reconciles = prometheus.NewCounter(prometheus.CounterOpts{Name: "database_controller_reconciles_total"})

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer reconciles.Inc()
	var db Database
	if err := r.Get(ctx, req.NamespacedName, &db); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !db.DeletionTimestamp.IsZero() {
		if controllerutil.RemoveFinalizer(&db, finalizer) {
			return ctrl.Result{}, r.Update(ctx, &db)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(&db, finalizer) {
		if err := r.Update(ctx, &db); err != nil {
			return ctrl.Result{}, err
		}
	}
	replicas := int32(1)
	if db.Spec.Replicas != nil {
		replicas = *db.Spec.Replicas
	}
	if err := r.ensureService(ctx, &db); err != nil {
		return ctrl.Result{}, err
	}
	set, err := r.ensureStatefulSet(ctx, &db, replicas)
	if err != nil {
		return ctrl.Result{}, err
	}
	phase := "Creating"
	if set.Status.ReadyReplicas >= replicas && set.Status.ObservedGeneration == set.Generation {
		phase = "Running"
	}
	status := DatabaseStatus{
		Phase:              phase,
		Ready:              phase == "Running",
		Replicas:           set.Status.ReadyReplicas,
		Endpoint:           fmt.Sprintf("%s-0.%s.%s.svc.cluster.local:%d", db.Name, db.Name, db.Namespace, ports[db.Spec.Engine]),
		ObservedGeneration: db.Generation,
	}
	if db.Status != status {
		db.Status = status
		if err := r.Status().Update(ctx, &db); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

func labels(db *Database) map[string]string {
	return map[string]string{"app.kubernetes.io/instance": db.Name, "app.kubernetes.io/name": db.Spec.Engine}
}

func (r *reconciler) ensureService(ctx context.Context, db *Database) error {
	var service corev1.Service
	err := r.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: db.Name}, &service)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	service = corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: db.Name, Namespace: db.Namespace, Labels: labels(db)},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  labels(db),
			Ports:     []corev1.ServicePort{{Name: db.Spec.Engine, Port: ports[db.Spec.Engine]}},
		},
	}
	if err := ctrl.SetControllerReference(db, &service, r.Scheme()); err != nil {
		return err
	}
	return r.Create(ctx, &service)
}

func (r *reconciler) ensureStatefulSet(ctx context.Context, db *Database, replicas int32) (*appsv1.StatefulSet, error) {
	var set appsv1.StatefulSet
	err := r.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: db.Name}, &set)
	if err == nil {
		if set.Spec.Replicas == nil || *set.Spec.Replicas != replicas {
			set.Spec.Replicas = &replicas
			return &set, r.Update(ctx, &set)
		}
		return &set, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	storage, err := resource.ParseQuantity(db.Spec.Storage)
	if err != nil {
		return nil, err
	}
	set = appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: db.Name, Namespace: db.Namespace, Labels: labels(db)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: db.Name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels(db)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(db)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:         db.Spec.Engine,
					Image:        fmt.Sprintf("docker.io/library/%s:%s", db.Spec.Engine, db.Spec.Version),
					Ports:        []corev1.ContainerPort{{Name: db.Spec.Engine, ContainerPort: ports[db.Spec.Engine]}},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: storage},
					},
				},
			}},
		},
	}
	if err := ctrl.SetControllerReference(db, &set, r.Scheme()); err != nil {
		return nil, err
	}
	return &set, r.Create(ctx, &set)
}

func main() {
	var metricsAddress, probeAddress string
	var qps float64
	var burst, concurrency int
	// controller-runtime defines --kubeconfig itself; GetConfig reads it.
	flag.StringVar(&metricsAddress, "metrics-bind-address", ":8080", "address of /metrics")
	flag.StringVar(&probeAddress, "health-probe-bind-address", ":8081", "address of the probes")
	flag.Float64Var(&qps, "kube-api-qps", 20, "client-side requests per second")
	flag.IntVar(&burst, "kube-api-burst", 30, "client-side burst")
	flag.IntVar(&concurrency, "max-concurrent-reconciles", 1, "reconciles at once")
	flag.String("log-format", "", "accepted for the benchmark; unused")
	flag.String("backup-agent-image", "", "accepted for the benchmark; unused")
	flag.Parse()

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	scheme.AddKnownTypes(groupVersion, &Database{}, &DatabaseList{})
	metav1.AddToGroupVersion(scheme, groupVersion)

	config, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	config.QPS = float32(qps)
	config.Burst = burst
	manager, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddress},
		HealthProbeBindAddress: probeAddress,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
	// The benchmark waits for this gauge, which the project's controller sets once it
	// leads; this operator runs without leader election.
	leader := prometheus.NewGauge(prometheus.GaugeOpts{Name: "database_controller_leader"})
	leader.Set(1)
	metrics.Registry.MustRegister(leader, reconciles)

	err = ctrl.NewControllerManagedBy(manager).
		For(&Database{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(&reconciler{Client: manager.GetClient()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
	if err := manager.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}
